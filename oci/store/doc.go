// Package store keeps what tend pulls from registries in stateDir: a
// content-addressed blob store that verifies every byte, resumes
// interrupted downloads and has two downloaders of one blob take turns;
// tar layers kept unpacked, each as a tree of files; version folders
// materialised from hard links to blobs and trees; the garbage
// collection of what no version keeps; and the free space a pull needs.
// In the flow of DESIGN.md, the model driver pulls and materialises with
// its Store, and the OCI source keeps a fleet artifact's layer in one.
package store
