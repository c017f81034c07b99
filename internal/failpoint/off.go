//go:build !failpoints

package failpoint

// Hit marks a durable step; see the package comment.
func Hit(string) {}

// Enabled reports whether this build kills itself at failpoints.
const Enabled = false
