// Package errkind makes the errors that carry a message of their own and
// still match one of a package's sentinel errors with errors.Is: a
// not-found that names what was looked for, a refusal that says why. It
// is a helper of every stage, not a stage of DESIGN.md's flow.
package errkind
