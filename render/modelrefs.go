package render

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/planner"
)

// ErrModelFileNotIncluded means a service references a file of a model
// (${model:NAME}/FILE) that the model's folder will not hold: its
// include does not select it, or its artifact has no such file.
var ErrModelFileNotIncluded = errors.New("references a file the model's folder will not hold")

// modelFileRef finds ${model:NAME}/FILE in a service's field: FILE runs
// to a space, a quote or a separator (",", ";", ":", "=").
var modelFileRef = regexp.MustCompile(`\$\{model:([^}]*)\}/([^\s"',;:=$]+)`)

// checkModelRefs checks every ${model:NAME}/FILE reference of s against
// the model's include: FILE, or a file under it, must be one the include
// selects (a model without an include holds every file), and, when the
// resolver listed the artifact's files (Model.Files), one of them. A
// FILE with glob characters (a shell pattern), or one that climbs out of
// the folder, is not checked.
func checkModelRefs(s manifest.Service, models map[string]Model) error {
	var errs []error
	check := func(field, v string) {
		for _, m := range modelFileRef.FindAllStringSubmatch(v, -1) {
			spec, ok := models[m[1]]
			file := strings.TrimSuffix(path.Clean(m[2]), "/")
			if !ok || len(spec.Include) == 0 || strings.ContainsAny(file, "*?[{") || file == "." || file == ".." || strings.HasPrefix(file, "../") {
				continue
			}
			if err := checkModelFile(spec, file); err != nil {
				errs = append(errs, fmt.Errorf("%s%s: %s: %w", planner.ServiceID(s.Name), fieldOrigin(s.Origin, field), m[0], err))
			}
		}
	}
	for i, c := range s.Command {
		check(fmt.Sprintf(".command[%d]", i), c)
	}
	for i, c := range s.Args {
		check(fmt.Sprintf(".args[%d]", i), c)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		check(".env."+k, s.Env[k])
	}
	check(".workingDir", s.WorkingDir)
	if h := s.Health; h != nil {
		check(".health.http", h.HTTP)
		check(".health.tcp", h.TCP)
		for i, c := range h.Exec {
			check(fmt.Sprintf(".health.exec[%d]", i), c)
		}
	}
	return errors.Join(errs...)
}

// checkModelFile checks that model m's folder holds file (a clean slash
// path) or a folder of that name.
func checkModelFile(m Model, file string) error {
	if !modelkit.IncludeMayHold(m.Include, file) {
		return fmt.Errorf("%w: model %s's include %s selects no %s; add %q to the model's include, or reference a file it selects",
			ErrModelFileNotIncluded, m.Name, FormatInclude(m.Include), file, file)
	}
	if m.Files == nil {
		return nil
	}
	for _, f := range m.Files {
		if f == file || strings.HasPrefix(f, file+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not a file of model %s (%s), which holds %s with include %s; fix the path, or the model's ref",
		ErrModelFileNotIncluded, file, m.Name, m.Digest, printable.ShortList(m.Files, 10), FormatInclude(m.Include))
}

// fieldOrigin formats where field of a resource was declared:
// " (devices/cam-017/device.yaml:14 spec.services[0].command[2])".
func fieldOrigin(o manifest.Origin, field string) string {
	if o.File == "" {
		return ""
	}
	s := " (" + o.File
	if l := o.Line(field); l > 0 {
		s += fmt.Sprintf(":%d", l)
	}
	return s + " " + o.Field + field + ")"
}
