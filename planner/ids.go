package planner

import (
	"fmt"
	"strings"
)

// Resource ids, as plans, status and `tend logs` print them: model/NAME,
// service/NAME, and for files the kind followed by the absolute path,
// file/etc/infer/config.yaml.
const (
	modelPrefix   = "model/"
	servicePrefix = "service/"
	filePrefix    = "file"
)

// FileID returns the resource id of the file at path:
// "file/etc/infer/config.yaml" for "/etc/infer/config.yaml".
func FileID(path string) string { return filePrefix + path }

// FilePath returns the path of the file whose resource id is id, the
// inverse of FileID.
func FilePath(id string) string { return strings.TrimPrefix(id, filePrefix) }

// ModelID returns the resource id of the model called name.
func ModelID(name string) string { return modelPrefix + name }

// ModelName returns the name in a model resource id.
func ModelName(id string) string { return strings.TrimPrefix(id, modelPrefix) }

// ServiceID returns the resource id of the service called name.
func ServiceID(name string) string { return servicePrefix + name }

// ServiceName returns the name in a service resource id.
func ServiceName(id string) string { return strings.TrimPrefix(id, servicePrefix) }

// KindOf returns the kind a resource id names.
func KindOf(id string) (Kind, error) {
	k, err := ParseKind(id[:strings.IndexByte(id+"/", '/')])
	if err != nil {
		return 0, fmt.Errorf("resource id %q: %w", id, err)
	}
	return k, nil
}

// Fields the planner compares, by kind, in the order Resource.Fields holds
// them: a file's content digest and mode; a model's digest (of the
// manifest or index of the version active at its path) and include; a service's spec
// hash, for a container its image digest, and its replica count.
const (
	FieldContent  = "content"
	FieldMode     = "mode"
	FieldDigest   = "digest"
	FieldInclude  = "include" // a model's include, when it has one
	FieldSpec     = "spec"
	FieldImage    = "image"
	FieldReplicas = "replicas"
	// FieldLimits is a service's resource limits as its instances run
	// under them: "" when as declared, else how they differ on the node.
	FieldLimits = "limits"
)

// Values an observer reports for a field when something other than the
// resource stands in its place. They never equal a declared value, so the
// planner sees a difference, and its reason names what is in the way.
const (
	ValueDirectory   = "<directory>"
	ValueSymlink     = "<symlink>"
	ValueRegularFile = "<regular file>"
	ValueNotRegular  = "<not a regular file>"
)
