// Package confine keeps every path tend manages inside the allowed paths
// under root, with no way out through ".." or a symlink. The file and model
// drivers do all their work on the node through a Tree; render uses Locate
// to refuse a path outside allowPaths before anything runs. It is support
// for those stages, not a stage of the flow.
package confine
