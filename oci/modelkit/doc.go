// Package modelkit reads what a model artifact holds from its manifests
// alone: the layouts tend understands (ORAS, tar layers, KitOps ModelKits
// with their Kitfile and base ModelKits, CNCF ModelPack, indexes by
// platform) as the entries of an Artifact, each checked to stay inside
// its version folder, and what a model's include selects of them. It
// reads the manifests through a BlobReader: the store's copy, or the
// registry's (Inspect, with which render knows what a download costs
// where there is no store, in CI).
package modelkit
