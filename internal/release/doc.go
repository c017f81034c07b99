// Package release builds the container image of a tend release: the
// static linux binaries that make release (.ci/release) stamped, FROM
// scratch, one image per platform under a multi-platform index, written
// as an OCI image layout in a tar archive. Nothing is pulled: the image
// holds the binary and an empty /tmp, and its digest depends only on the
// binaries, the version, the commit and the time it is given
// (SOURCE_DATE_EPOCH), so the same commit gives the same digest. It is
// not part of the tend binary: .ci/release runs it as
// internal/release/imagetool.
package release
