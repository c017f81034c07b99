package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Describe returns a rendered spec (a File, Model or Service) as one side
// of a content diff: a file's bytes, a model's ref, tag, digest, include
// and base ModelKits, a
// service's command, env and the rest of its first replica's spec. ok is
// false for anything else. Drivers describe what is on the node with the
// same fields, so that only what differs is printed.
func Describe(spec any) (planner.Content, bool) {
	switch s := spec.(type) {
	case File:
		return planner.Content{Data: s.Content, Size: int64(len(s.Content)), Sensitive: s.Sensitive}, true
	case Model:
		return planner.Content{Fields: modelFields(s)}, true
	case Service:
		return planner.Content{Fields: serviceFields(s)}, true
	}
	return planner.Content{}, false
}

func modelFields(m Model) []planner.Field {
	f := []planner.Field{{Name: "ref", Value: m.Ref}}
	if m.Policy != "" {
		f = append(f, planner.Field{Name: "policy", Value: m.Policy})
	}
	if m.Tag != "" {
		f = append(f, planner.Field{Name: "tag", Value: m.Tag})
	}
	if _, err := v1.NewHash(m.Digest); err == nil {
		f = append(f, planner.Field{Name: "digest", Value: m.Digest})
	}
	if len(m.Include) > 0 {
		f = append(f, planner.Field{Name: "include", Value: FormatInclude(m.Include)})
	}
	for _, b := range m.Bases {
		f = append(f, planner.Field{Name: "base", Value: b})
	}
	return f
}

// serviceFields describes a service by its first replica, whose
// ${replica} is 0; its replica count is a field of the plan itself.
func serviceFields(s Service) []planner.Field {
	restart := s.Restart
	if restart == "" {
		restart = manifest.RestartAlways
	}
	if len(s.Replicas) == 0 {
		return []planner.Field{{Name: "restart", Value: restart}}
	}
	r := s.Replicas[0]
	var f []planner.Field
	if s.Image != "" {
		f = append(f, planner.Field{Name: "image", Value: s.Image})
		if r.Image != s.Image {
			f = append(f, planner.Field{Name: "image.digest", Value: s.ImageDigest})
		}
		if len(r.Args) > 0 {
			args, _ := json.Marshal(r.Args)
			f = append(f, planner.Field{Name: "args", Value: string(args)})
		}
		for _, m := range r.Mounts {
			v := m.Source
			if m.ReadOnly {
				v += " (read-only)"
			}
			f = append(f, planner.Field{Name: "mount." + m.Target, Value: v})
		}
		network := r.Network
		if network == "" {
			network = manifest.NetworkHost
		}
		f = append(f, planner.Field{Name: "network", Value: network})
		if len(r.Devices) > 0 {
			f = append(f, planner.Field{Name: "devices", Value: strings.Join(r.Devices, " ")})
		}
		if r.GPUs != "" {
			f = append(f, planner.Field{Name: "gpus", Value: r.GPUs})
		}
	} else {
		cmd, _ := json.Marshal(r.Command)
		f = append(f, planner.Field{Name: "command", Value: string(cmd)})
	}
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		f = append(f, planner.Field{Name: "env." + k, Value: r.Env[k]})
	}
	add := func(name, value string) {
		if value != "" {
			f = append(f, planner.Field{Name: name, Value: value})
		}
	}
	add("workingDir", r.WorkingDir)
	add("user", r.User)
	add("group", r.Group)
	add("restart", restart)
	add("memory", memory(r.Memory))
	add("cpu", cpu(r.CPUMilli))
	add("health", health(r.Health))
	return f
}

// memory prints bytes in the largest binary unit that divides them.
func memory(b int64) string {
	switch {
	case b <= 0:
		return ""
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dGi", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMi", b>>20)
	case b%(1<<10) == 0:
		return fmt.Sprintf("%dKi", b>>10)
	}
	return fmt.Sprintf("%d", b)
}

// cpu prints millicores as manifests write them: "2", "1500m".
func cpu(milli int64) string {
	switch {
	case milli <= 0:
		return ""
	case milli%1000 == 0:
		return fmt.Sprintf("%d", milli/1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// health names a probe by its kind and target: "http http://…/healthz".
func health(h *manifest.Health) string {
	switch {
	case h == nil:
		return ""
	case h.HTTP != "":
		return "http " + h.HTTP
	case h.TCP != "":
		return "tcp " + h.TCP
	case len(h.Exec) > 0:
		b, _ := json.Marshal(h.Exec)
		return "exec " + string(b)
	}
	return ""
}
