// Package validate is tend validate's check of a fleet, for CI and
// before a commit: which profiles apply to which devices, the wave each
// device falls in, and the report that says it. Files checks the files
// and folders it is given, without Git; Repo checks every device of the
// fleet repo at a revision, found as tend diff finds them (the diff
// package reads and renders them); Device reports the check of one
// device. A problem is written once, under every device or document it
// is a problem of.
//
// It is a package of diff, the CI's reading of the fleet, that writes
// what tend validate prints; cmd/tend only turns the flags into its
// calls.
package validate
