// Package extract unpacks tar layers into a folder, confined: no entry,
// and no symlink an earlier entry planted, reaches outside it; every byte
// and every entry written is counted against a Budget; and an image's
// layers apply over each other with their whiteouts, as the OCI image
// layer spec says. The OCI source unpacks a fleet artifact with it, and
// the store builds a model's version folder through its Extractor from
// a layer's tree.
package extract
