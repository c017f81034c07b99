package manifest

import (
	"sort"
	"strings"
)

// Expand replaces every ${…} in s with what value returns for its inside
// ("model:detector", "file:/etc/infer/config.yaml", "replica").
func Expand(s string, value func(ref string) string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return reference().ReplaceAllStringFunc(s, func(m string) string {
		return value(m[2 : len(m)-1])
	})
}

// Deps returns the resource ids a service depends on: every model and file
// its command, env, working directory and health probe reference, and its
// restartOn entries, sorted and without repeats.
func (s Service) Deps() []string {
	seen := map[string]bool{}
	var out []string
	add := func(ref string) {
		kind, target, ok := strings.Cut(ref, ":")
		if !ok || kind != "model" && kind != "file" {
			return
		}
		id := kind + "/" + strings.TrimPrefix(target, "/")
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	scan := func(v string) {
		for _, m := range reference().FindAllStringSubmatch(v, -1) {
			add(m[1])
		}
	}
	for _, c := range s.Command {
		scan(c)
	}
	for _, c := range s.Args {
		scan(c)
	}
	for _, m := range s.Mounts {
		scan(m.Source)
	}
	for _, v := range s.Env {
		scan(v)
	}
	scan(s.WorkingDir)
	if h := s.Health; h != nil {
		scan(h.HTTP)
		scan(h.TCP)
		for _, c := range h.Exec {
			scan(c)
		}
	}
	for _, r := range s.RestartOn {
		add(r)
	}
	sort.Strings(out)
	return out
}
