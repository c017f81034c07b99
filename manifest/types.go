package manifest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// APIVersion is the apiVersion every tend document carries.
const APIVersion = "tend.dev/v1alpha1"

// Kinds of document tend reads.
const (
	KindDevice      = "Device"
	KindAgentConfig = "AgentConfig"
)

// Device is the desired state of one device: the merge of every Device
// document found under the device's path.
type Device struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   Metadata   `json:"metadata" jsonschema:"required"`
	Spec       DeviceSpec `json:"spec"`

	// Warnings are what composing the device found suspect but not
	// invalid (see Composed.Warnings); never read from a manifest.
	Warnings []*Error `json:"-"`
}

// Metadata names a device and carries its labels.
type Metadata struct {
	Name   string            `json:"name" jsonschema:"required"`
	Labels map[string]string `json:"labels,omitempty"`
}

// DeviceSpec lists the resources declared for a device.
type DeviceSpec struct {
	Models   []Model   `json:"models,omitempty"`
	Files    []File    `json:"files,omitempty"`
	Services []Service `json:"services,omitempty"`
}

// Model is a model artifact pulled from an OCI registry.
type Model struct {
	Name   string  `json:"name" jsonschema:"required"`
	Ref    string  `json:"ref" jsonschema:"required"`
	Path   string  `json:"path,omitempty"`
	Policy *Policy `json:"policy,omitempty"`
	// Include selects the files of the artifact to pull: globs over
	// their paths inside it (path.Match syntax, "**" for any number of
	// folders; a pattern naming a folder takes all it holds). Only blobs
	// holding a selected file are downloaded, and only selected files are
	// written. Empty: every file.
	Include []string `json:"include,omitempty"`
	// Verify adds signature requirements to the node's models.verify:
	// the model must satisfy both.
	Verify *ArtifactVerify `json:"verify,omitempty"`
	// Absent removes the model of this name that an earlier layer (a
	// profile) declares; the other fields are then not read.
	Absent bool `json:"absent,omitempty"`

	Origin Origin `json:"-"`
}

// Policy selects a tag when a model ref has none.
type Policy struct {
	Semver string `json:"semver" jsonschema:"required"`
}

// File is a file whose content is declared inline.
type File struct {
	Path    string `json:"path" jsonschema:"required"`
	Content string `json:"content"`
	Mode    string `json:"mode,omitempty" jsonschema:"oneof_type=string;integer,pattern=^0?[0-7]{3}$|^[0-7]{4}$"`
	// Sensitive hides the content in every output of tend (plans, diffs,
	// render, status, logs, errors): only its size and digest are shown.
	Sensitive bool `json:"sensitive,omitempty"`
	// Absent removes the file at this path that an earlier layer (a
	// profile) declares; the other fields are then not read.
	Absent bool `json:"absent,omitempty"`

	Origin Origin `json:"-"`
}

// Service is a supervised process, or with Image a container run through
// the Docker Engine API: exactly one of Command and Image is set.
type Service struct {
	Name    string   `json:"name" jsonschema:"required"`
	Command []string `json:"command,omitempty" jsonschema:"minItems=1"`
	// Image is a container image, by tag or @sha256:digest; the tag is
	// resolved to a digest every tick and the container runs that digest.
	Image string `json:"image,omitempty"`
	// Args are given to a container's entrypoint.
	Args []string `json:"args,omitempty"`
	// Mounts bind a ${model:NAME}, ${file:PATH} or a path under
	// allowPaths into a container.
	Mounts []Mount `json:"mounts,omitempty"`
	// Network is a container's network: host (the default), none or
	// bridge.
	Network string `json:"network,omitempty" jsonschema:"enum=host,enum=none,enum=bridge"`
	// Devices are host device nodes given to a container, e.g.
	// /dev/nvidia0.
	Devices []string `json:"devices,omitempty"`
	// GPUs asks the engine's NVIDIA runtime for GPUs: "all" or a count.
	GPUs        string            `json:"gpus,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	WorkingDir  string            `json:"workingDir,omitempty"`
	User        string            `json:"user,omitempty"`
	Group       string            `json:"group,omitempty"`
	Restart     string            `json:"restart,omitempty" jsonschema:"enum=always,enum=on-failure,enum=never"`
	Replicas    *int              `json:"replicas,omitempty" jsonschema:"minimum=0"`
	Resources   *Resources        `json:"resources,omitempty"`
	Health      *Health           `json:"health,omitempty"`
	RestartOn   []string          `json:"restartOn,omitempty"`
	StopTimeout Duration          `json:"stopTimeout,omitempty"`
	// UpdateLock is the absolute path of a file (under root) that the
	// service locks (an exclusive flock) while it must not be stopped:
	// while a process holds that lock, a release that would stop or
	// restart the service waits, up to the agent's maxLockWait. tend
	// never creates the file; a missing file is a lock not held.
	UpdateLock string `json:"updateLock,omitempty"`
	// Verify adds signature requirements to the node's runtime.verify:
	// the service's image must satisfy both. Only with image:.
	Verify *ArtifactVerify `json:"verify,omitempty"`
	// Absent removes the service of this name that an earlier layer (a
	// profile) declares; the other fields are then not read.
	Absent bool `json:"absent,omitempty"`

	Origin Origin `json:"-"`
}

// Mount binds a path of the node into a container.
type Mount struct {
	Source   string `json:"source" jsonschema:"required"`
	Target   string `json:"target" jsonschema:"required"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Container reports whether s runs as a container (Image is set).
func (s Service) Container() bool { return s.Image != "" }

// Container networks.
const (
	NetworkHost   = "host"
	NetworkNone   = "none"
	NetworkBridge = "bridge"
)

// Resources are the limits a service runs under.
type Resources struct {
	Memory string `json:"memory,omitempty" jsonschema:"oneof_type=string;integer"`
	CPU    string `json:"cpu,omitempty" jsonschema:"oneof_type=string;number"`
}

// Health is a service's health probe: exactly one of HTTP, TCP or Exec.
type Health struct {
	HTTP             string   `json:"http,omitempty"`
	TCP              string   `json:"tcp,omitempty"`
	Exec             []string `json:"exec,omitempty"`
	StartupGrace     Duration `json:"startupGrace,omitempty"`
	Interval         Duration `json:"interval,omitempty"`
	FailureThreshold int      `json:"failureThreshold,omitempty" jsonschema:"minimum=0"`
}

// Restart policies.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
	RestartNever     = "never"
)

// DefaultFileMode is the mode of a file that declares none.
const DefaultFileMode = "0644"

// Origin records where a resource was declared, for error messages.
type Origin struct {
	File  string // path of the manifest file, relative to the repo
	Field string // field path inside the document, e.g. spec.files[1]
	lines map[string]int
}

// Line returns the line of field (relative to the origin's field path, e.g.
// ".path"), or of the resource itself when the field has no recorded line.
func (o Origin) Line(field string) int {
	if l, ok := o.lines[o.Field+field]; ok {
		return l
	}
	return o.lines[o.Field]
}

// Start returns the first line of the document o is in that has a
// field, or 0.
func (o Origin) Start() int {
	start := 0
	for _, l := range o.lines {
		if start == 0 || l < start {
			start = l
		}
	}
	return start
}

// Duration is a time.Duration written in Go syntax ("30s", "5m").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// FormatDuration writes d in Go syntax without its zero tails, as a
// manifest would declare it: 1h, 1h30m, 45s (Duration.String writes
// 1h0m0s).
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalJSON writes d in Go syntax.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration in Go syntax.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: use Go syntax like \"30s\" or \"5m\"", s)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	*d = Duration(v)
	return nil
}
