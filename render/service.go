package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// service expands s (refs gives the value of ${model:…} and ${file:…}) and
// returns its spec and its planner resource. The hash covers the spec with
// ${replica} still in it, so adding a replica does not change it.
//
// A container's mount source that is a path, not a reference, is a path
// of the node: hostPath places it under the root.
func service(s manifest.Service, refs func(ref string) string, hostPath func(string) string, image Resolution) (Service, planner.Resource, error) {
	replicas := 1
	if s.Replicas != nil {
		replicas = *s.Replicas
	}
	if replicas < 0 {
		return Service{}, planner.Resource{}, fmt.Errorf("replicas must be 0 or more, got %d", replicas)
	}
	tmpl := expandService(s, func(ref string) string {
		if ref == "replica" {
			return "${replica}"
		}
		return refs(ref)
	})
	spec := Service{Name: s.Name, Kind: KindProcess, Hash: specHash(tmpl), Restart: s.Restart, StopTimeout: s.StopTimeout.D()}
	spec.Declared = spec.Hash
	pinned := ""
	if s.Container() {
		spec.Kind = KindContainer
		spec.Image, spec.ImageDigest, spec.ImageTag, spec.ImagePull = s.Image, image.Digest, image.Tag, image.Pull
		spec.Hash = containerHash(tmpl, image.Digest)
		spec.Declared = containerHash(tmpl, "")
		pinned = s.Image
		if strings.HasPrefix(image.Digest, "sha256:") {
			pinned = Repository(s.Image) + "@" + image.Digest
		}
	}
	var memory, cpu int64
	if r := s.Resources; r != nil {
		var err error
		if r.Memory != "" {
			if memory, err = manifest.ParseMemory(r.Memory); err != nil {
				return Service{}, planner.Resource{}, err
			}
		}
		if r.CPU != "" {
			if cpu, err = manifest.ParseCPU(r.CPU); err != nil {
				return Service{}, planner.Resource{}, err
			}
		}
	}
	for i := range replicas {
		n := strconv.Itoa(i)
		e := expandService(tmpl, func(ref string) string {
			if ref == "replica" {
				return n
			}
			return "${" + ref + "}"
		})
		for i, m := range s.Mounts {
			if !strings.HasPrefix(m.Source, "${") {
				e.Mounts[i].Source = hostPath(m.Source)
			}
		}
		spec.Replicas = append(spec.Replicas, Replica{
			Command: e.Command, Env: e.Env, WorkingDir: e.WorkingDir, User: e.User, Group: e.Group,
			Memory: memory, CPUMilli: cpu, Health: e.Health,
			Image: pinned, Args: e.Args, Mounts: e.Mounts, Network: e.Network, Devices: e.Devices, GPUs: e.GPUs,
		})
	}
	fields := []planner.Field{{Name: planner.FieldSpec, Value: spec.Hash}}
	if s.Container() {
		fields = append(fields, planner.Field{Name: planner.FieldImage, Value: image.Digest})
	}
	fields = append(fields, planner.Field{Name: planner.FieldReplicas, Value: strconv.Itoa(replicas)})
	// Limits run as declared: a runtime that reads them back reports any
	// difference on the node as this field's value (drift).
	fields = append(fields, planner.Field{Name: planner.FieldLimits})
	r := planner.Resource{ID: planner.ServiceID(s.Name), Kind: planner.KindService, Deps: s.Deps(), Fields: fields, Reason: image.Reason}
	if image.Held != nil {
		r.Held = image.Held.Error()
	}
	return spec, r, nil
}

// containerHash is the hash of what a container service's instances run
// with, its image digest included: a tag that moves replaces them. Its
// input is fixed, as specHash's is; a process service's hash has none of
// these fields, so adding them restarted no process.
func containerHash(tmpl manifest.Service, digest string) string {
	b, _ := json.Marshal(struct {
		Image, Digest string
		Args          []string
		Mounts        []manifest.Mount
		Network       string
		Devices       []string
		GPUs          string
		runSpec
	}{tmpl.Image, digest, tmpl.Args, tmpl.Mounts, tmpl.Network, tmpl.Devices, tmpl.GPUs, runOf(tmpl)})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// runSpec is what a process or a container service runs with besides its
// program: embedded in the hash inputs, its fields are written in place,
// so the hashes stay as they were before it was shared.
type runSpec struct {
	Env         map[string]string
	WorkingDir  string
	User, Group string
	Restart     string
	Resources   *manifest.Resources
	Health      *manifest.Health
	StopTimeout manifest.Duration
}

func runOf(s manifest.Service) runSpec {
	return runSpec{s.Env, s.WorkingDir, s.User, s.Group, s.Restart, s.Resources, s.Health, s.StopTimeout}
}

// specHash is the hash of what a service's instances run with. Its input
// is fixed: a change here restarts every service of every node once.
func specHash(tmpl manifest.Service) string {
	b, _ := json.Marshal(struct {
		Command []string
		runSpec
	}{tmpl.Command, runOf(tmpl)})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// expandService returns s with every ${…} in its command, env, working
// directory and health probe replaced through value.
func expandService(s manifest.Service, value func(string) string) manifest.Service {
	out := s
	out.Command = make([]string, len(s.Command))
	for i, c := range s.Command {
		out.Command[i] = manifest.Expand(c, value)
	}
	if s.Env != nil {
		out.Env = make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			out.Env[k] = manifest.Expand(v, value)
		}
	}
	if s.Args != nil {
		out.Args = make([]string, len(s.Args))
		for i, a := range s.Args {
			out.Args[i] = manifest.Expand(a, value)
		}
	}
	if s.Mounts != nil {
		out.Mounts = make([]manifest.Mount, len(s.Mounts))
		for i, m := range s.Mounts {
			out.Mounts[i] = m
			out.Mounts[i].Source = manifest.Expand(m.Source, value)
		}
	}
	out.WorkingDir = manifest.Expand(s.WorkingDir, value)
	if h := s.Health; h != nil {
		hc := *h
		hc.HTTP, hc.TCP = manifest.Expand(h.HTTP, value), manifest.Expand(h.TCP, value)
		hc.Exec = make([]string, len(h.Exec))
		for i, c := range h.Exec {
			hc.Exec[i] = manifest.Expand(c, value)
		}
		out.Health = &hc
	}
	return out
}
