// Package testlayout reads, for tests, an OCI image layout packed in a tar
// (what make release writes for the CLI's image): the index its
// index.json names. It is test support, not a stage of the flow.
package testlayout
