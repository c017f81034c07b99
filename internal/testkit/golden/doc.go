// Package golden compares user-visible output with files in testdata/ and
// rewrites them with `go test ./... -update`; it is test support, not part
// of tend's flow.
//
// Every test package imports it (at least for its side effect) so that the
// -update flag is defined in all of them and `go test ./... -update` works.
package golden
