// Package buildinfo says what a tend binary knows of its own build: the
// version and commit set with -ldflags at make build, or what the Go
// toolchain stamped (the Git commit, its time, a modified tree, the
// module's version), for tend version and tend-hub version.
package buildinfo
