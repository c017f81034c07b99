// Package file is the applier's driver for files declared inline in
// manifests: it observes a file's content digest and mode, writes it
// atomically with its exact mode, deletes what tend created and prunes the
// folders that leaves empty, and can put a file back as it was for a
// rollback. Every path is worked on through a confine.Tree, so nothing is
// written outside allowPaths under root.
package file
