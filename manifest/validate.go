package manifest

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"
	"github.com/bmatcuk/doublestar/v4"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/internal/feature"
)

// ValidateOptions are the node's limits that a device must respect.
type ValidateOptions struct {
	// AllowPaths are the absolute paths under which files and models may be
	// placed. When CheckAllowPaths is false they are not checked (validating
	// manifests in CI without an agent config).
	AllowPaths      []string
	CheckAllowPaths bool
}

var (
	resourceName = lazyRegexp(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
	envName      = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	octalMode    = lazyRegexp(`^0?[0-7]{3}$|^[0-7]{4}$`)
	reference    = lazyRegexp(`\$\{([^}]*)\}`)
)

// Validate checks every resource of d and returns all problems, each naming
// file, line and field.
func (d *Device) Validate(opts ValidateOptions) error {
	return d.validate(opts, false).err()
}

// validate checks d as Validate does; with anyRef, a ${model:NAME} or
// ${file:PATH} is not checked against what d declares (a profile checked
// on its own: a Device document may declare what it references).
func (d *Device) validate(opts ValidateOptions, anyRef bool) Errors {
	var errs Errors
	v := validator{opts: opts, errs: &errs, models: map[string]bool{}, files: map[string]bool{}, anyRef: anyRef}
	seen := map[string]Origin{}
	dup := func(id string, o Origin, field string) bool {
		if first, ok := seen[id]; ok {
			v.at(o, field, "%s is declared twice (first at %s:%d); names must be unique per device", id, first.File, first.Line(""))
			return true
		}
		seen[id] = o
		return false
	}
	for _, m := range d.Spec.Models {
		if !dup("model/"+m.Name, m.Origin, ".name") {
			v.models[m.Name] = true
		}
		v.model(m)
	}
	for _, f := range d.Spec.Files {
		if !dup("file"+f.Path, f.Origin, ".path") {
			v.files[f.Path] = true
		}
		v.file(f)
	}
	for _, s := range d.Spec.Services {
		dup("service/"+s.Name, s.Origin, ".name")
		v.service(s)
	}
	return errs
}

type validator struct {
	opts   ValidateOptions
	errs   *Errors
	models map[string]bool
	files  map[string]bool
	anyRef bool // see Device.validate
}

func (v validator) at(o Origin, field, format string, args ...any) {
	v.errs.add(o.File, o.Line(field), o.Field+field, format, args...)
}

func (v validator) name(o Origin, n string) {
	if len(n) > 63 || !resourceName().MatchString(n) {
		v.at(o, ".name", "invalid name %q: use lowercase letters, digits, '-', '_' and '.', at most 63 characters", n)
	}
}

func (v validator) model(m Model) {
	o := m.Origin
	v.name(o, m.Name)
	last := m.Ref[strings.LastIndex(m.Ref, "/")+1:]
	hasTag, hasDigest := strings.Contains(last, ":"), strings.Contains(m.Ref, "@")
	switch {
	case m.Ref == "":
		v.at(o, ".ref", "missing: the OCI reference of the model, e.g. registry.local:5000/models/detector:v8")
	case m.Policy != nil:
		if hasTag || hasDigest {
			v.at(o, ".ref", "%q pins a tag or digest but policy.semver picks the tag: remove one of them", m.Ref)
		} else if _, err := name.NewRepository(m.Ref); err != nil {
			v.at(o, ".ref", "invalid repository %q: %v", m.Ref, err)
		}
		if _, err := semver.NewConstraint(m.Policy.Semver); err != nil || m.Policy.Semver == "" {
			v.at(o, ".policy.semver", "invalid semver range %q: use a range like \">=8.0.0 <9\"", m.Policy.Semver)
		}
	case !hasTag && !hasDigest:
		v.at(o, ".ref", "%q has no tag or digest: add :TAG or @sha256:…, or set policy.semver to follow tags", m.Ref)
	default:
		if _, err := name.ParseReference(m.Ref); err != nil {
			v.at(o, ".ref", "invalid OCI reference %q: %v", m.Ref, err)
		}
	}
	if m.Path != "" {
		v.path(o, ".path", m.Path)
	}
	v.verify(o, m.Verify)
	seen := map[string]int{}
	for i, pat := range m.Include {
		field := fmt.Sprintf(".include[%d]", i)
		if first, dup := seen[pat]; dup {
			v.at(o, field, "%q is include[%d] too: list a pattern once", pat, first)
			continue
		}
		seen[pat] = i
		if why := includeProblem(pat); why != "" {
			v.at(o, field, "%q %s", pat, why)
		}
	}
}

// verify checks a model's or service's own verify block.
func (v validator) verify(o Origin, b *ArtifactVerify) {
	if b == nil {
		return
	}
	for _, p := range b.problems() {
		v.at(o, ".verify"+p.field, "%s", p.msg)
	}
}

// includeProblem says what is wrong with an include pattern, "" when
// nothing: it is a clean relative slash path, never climbing out with
// "..", in path.Match syntax with "**" for any number of folders.
func includeProblem(pat string) string {
	switch {
	case pat == "":
		return "is empty: use a glob such as \"*.gguf\""
	case strings.HasPrefix(pat, "/"):
		return "is absolute: patterns are paths inside the artifact, such as \"weights/*.safetensors\""
	case pat == ".." || strings.HasPrefix(pat, "../") || strings.HasSuffix(pat, "/..") || strings.Contains(pat, "/../"):
		return "climbs out with \"..\": patterns are paths inside the artifact"
	case path.Clean(pat) != pat || pat == ".":
		return fmt.Sprintf("is not a clean path (%q)", path.Clean(pat))
	case !doublestar.ValidatePattern(pat):
		return "is not a valid glob: use *, ?, [a-z] and ** (any number of folders); escape a literal one with \\"
	}
	return ""
}

func (v validator) file(f File) {
	v.path(f.Origin, ".path", f.Path)
	if f.Mode != "" {
		if _, err := ParseMode(f.Mode); err != nil {
			v.at(f.Origin, ".mode", "%v", err)
		}
	}
}

// ParseMode parses an octal permission string such as "0644".
func ParseMode(s string) (uint32, error) {
	if !octalMode().MatchString(s) {
		return 0, fmt.Errorf("invalid mode %q: use an octal string like \"0644\" (quoted)", s)
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid mode %q: %w", s, err)
	}
	return uint32(m), nil
}

// path checks that p is absolute, clean, printable (a newline in a path
// could forge lines of a plan's text) and under an allowed path.
func (v validator) path(o Origin, field, p string) {
	switch {
	case p == "":
		v.at(o, field, "missing: an absolute path such as /etc/infer/config.yaml")
	case !utf8.ValidString(p):
		v.at(o, field, "%q is not valid UTF-8: write the path in UTF-8", p)
	case strings.ContainsFunc(p, unicode.IsControl):
		v.at(o, field, "%q holds a control character (a newline, tab, escape…): paths may not; rename it", p)
	case !strings.HasPrefix(p, "/"):
		v.at(o, field, "%q is relative: use an absolute path such as /etc/infer/config.yaml", p)
	case path.Clean(p) != p || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		v.at(o, field, "%q is not a clean path (write it as %q, without '..', '.', '//' or a trailing '/')", p, path.Clean(p))
	case p == "/":
		v.at(o, field, "the root directory cannot be managed")
	case len(p) > maxPath:
		v.at(o, field, "path is %d bytes long; the limit is %d", len(p), maxPath)
	case longName(p) != "":
		v.at(o, field, "path component %.40q… is longer than %d bytes", longName(p), maxName)
	case v.opts.CheckAllowPaths && slices.Contains(v.opts.AllowPaths, p) && !Allowed(p, v.opts.AllowPaths):
		v.at(o, field, "%s", EntryItself(p))
	case v.opts.CheckAllowPaths && !Allowed(p, v.opts.AllowPaths):
		if len(v.opts.AllowPaths) == 0 {
			v.at(o, field, "%q is outside allowPaths, which is empty: the agent may not write anywhere; add allowPaths in agent.yaml or --allow-path", p)
			return
		}
		v.at(o, field, "%q is outside allowPaths %v: add an entry to allowPaths in agent.yaml (or --allow-path) or move the file", p, v.opts.AllowPaths)
	}
}

// Limits of Linux file systems, checked up front so a long name fails at
// validation with its file and line rather than at every apply.
const (
	maxPath = 4096
	maxName = 255
)

func longName(p string) string {
	for _, c := range strings.Split(p, "/") {
		if len(c) > maxName {
			return c
		}
	}
	return ""
}

// EntryItself says why a managed path may not be an allowPaths entry: tend
// writes inside an allowed folder (a file or a model's symlink is replaced
// by a rename in its folder), never the folder itself, which would take
// everything else under it along.
func EntryItself(p string) string {
	return fmt.Sprintf("%q is an allowPaths entry itself; declare a path under it, such as %s: "+
		"tend writes inside an allowed folder, never replaces the folder", p, path.Join(p, "NAME"))
}

// Allowed reports whether p lies strictly under one of allow.
func Allowed(p string, allow []string) bool {
	for _, a := range allow {
		if Under(p, a) {
			return true
		}
	}
	return false
}

// Under reports whether the clean absolute path p lies strictly under dir,
// with a path-boundary check: /etc/inferx is not under /etc/infer.
func Under(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func (v validator) service(s Service) {
	o := s.Origin
	v.name(o, s.Name)
	if s.Verify != nil && s.Image == "" {
		v.at(o, ".verify", "checks the signature of a container image and the service has no image:; remove verify")
	} else {
		v.verify(o, s.Verify)
	}
	switch {
	case s.Image != "" && len(s.Command) > 0:
		v.at(o, ".image", "set either command (a process) or image (a container), not both; a container's arguments go in args")
	case s.Image != "":
		v.container(o, s)
	case len(s.Command) == 0 || s.Command[0] == "":
		v.at(o, ".command", "missing: the program and its arguments, e.g. [\"/opt/infer/bin/server\", \"--port\", \"8080\"], or image: for a container")
	default:
		for _, f := range []struct {
			name string
			set  bool
		}{{"args", len(s.Args) > 0}, {"mounts", len(s.Mounts) > 0}, {"network", s.Network != ""}, {"devices", len(s.Devices) > 0}, {"gpus", s.GPUs != ""}} {
			if f.set {
				v.at(o, "."+f.name, "is for a container (a service with image:); a process service sees the node as it is")
			}
		}
	}
	for i, arg := range s.Command {
		v.refs(o, fmt.Sprintf(".command[%d]", i), arg)
	}
	for k, val := range s.Env {
		if !envName().MatchString(k) {
			v.at(o, ".env."+k, "invalid environment variable name %q", k)
		}
		v.refs(o, ".env."+k, val)
	}
	if s.WorkingDir != "" {
		v.refs(o, ".workingDir", s.WorkingDir)
		if !strings.HasPrefix(s.WorkingDir, "/") && !strings.HasPrefix(s.WorkingDir, "${") {
			v.at(o, ".workingDir", "%q is relative: use an absolute path", s.WorkingDir)
		}
	}
	switch s.Restart {
	case "", RestartAlways, RestartOnFailure, RestartNever:
	default:
		v.at(o, ".restart", "invalid restart policy %q: use always, on-failure or never", s.Restart)
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		v.at(o, ".replicas", "must be 0 or more, got %d", *s.Replicas)
	}
	if r := s.Resources; r != nil {
		if r.Memory != "" {
			if _, err := ParseMemory(r.Memory); err != nil {
				v.at(o, ".resources.memory", "%v", err)
			}
		}
		if r.CPU != "" {
			if _, err := ParseCPU(r.CPU); err != nil {
				v.at(o, ".resources.cpu", "%v", err)
			}
		}
	}
	if s.Health != nil {
		v.health(o, s)
	}
	for i, r := range s.RestartOn {
		v.ref(o, fmt.Sprintf(".restartOn[%d]", i), r)
	}
	if s.UpdateLock != "" {
		v.updateLock(o, s.UpdateLock)
	}
}

// updateLock checks a service's update lock: a clean absolute path of the
// node, inside allowPaths or not (tend only opens it to probe its lock,
// and never creates it), with no reference left in it once variables are
// expanded.
func (v validator) updateLock(o Origin, p string) {
	const field = ".updateLock"
	if strings.Contains(p, "${") {
		v.at(o, field, "%q holds a reference: an update lock is a path of the node, such as /run/infer/update.lock "+
			"(${var:NAME}, ${device} and ${label:KEY} are expanded; ${model:…}, ${file:…} and ${replica} are not)", p)
		return
	}
	lax := v
	lax.opts.CheckAllowPaths = false
	lax.path(o, field, p)
}

// container checks the fields of a service run as a container.
func (v validator) container(o Origin, s Service) {
	if err := feature.Containers.Check(); err != nil {
		v.at(o, ".image", "%v", err)
	}
	if _, err := name.ParseReference(s.Image); err != nil || strings.Contains(s.Image, "${") {
		why := "it holds a ${…} reference"
		if err != nil {
			why = err.Error()
		}
		v.at(o, ".image", "invalid image reference %q: %s; write REGISTRY/REPOSITORY:TAG or @sha256:…", s.Image, why)
	}
	for i, arg := range s.Args {
		v.refs(o, fmt.Sprintf(".args[%d]", i), arg)
	}
	targets := map[string]int{}
	for i, m := range s.Mounts {
		field := fmt.Sprintf(".mounts[%d]", i)
		if first, ok := targets[m.Target]; ok && m.Target != "" {
			v.at(o, field+".target", "%q is the target of mounts[%d] too: a container path takes one mount", m.Target, first)
		}
		targets[m.Target] = i
		switch {
		case m.Source == "":
			v.at(o, field+".source", "missing: ${model:NAME}, ${file:PATH} or an absolute path under allowPaths")
		case strings.HasPrefix(m.Source, "${"):
			if !reference().MatchString(m.Source) || reference().FindStringIndex(m.Source)[1] != len(m.Source) || reference().FindStringIndex(m.Source)[0] != 0 {
				v.at(o, field+".source", "%q: a reference is the whole source, as ${model:NAME} or ${file:PATH}", m.Source)
				break
			}
			v.refs(o, field+".source", m.Source)
		default:
			v.path(o, field+".source", m.Source)
		}
		if m.Target == "" || !strings.HasPrefix(m.Target, "/") || path.Clean(m.Target) != m.Target {
			v.at(o, field+".target", "%q: use a clean absolute path inside the container, such as /models/detector", m.Target)
		}
	}
	switch s.Network {
	case "", NetworkHost, NetworkNone, NetworkBridge:
	default:
		v.at(o, ".network", "invalid network %q: use host, none or bridge", s.Network)
	}
	for i, d := range s.Devices {
		if !strings.HasPrefix(d, "/dev/") || path.Clean(d) != d {
			v.at(o, fmt.Sprintf(".devices[%d]", i), "%q: use a device node of the host, such as /dev/nvidia0", d)
		}
	}
	if g := s.GPUs; g != "" && g != "all" {
		if n, err := strconv.Atoi(g); err != nil || n < 1 {
			v.at(o, ".gpus", "invalid gpus %q: use all or a count such as 1", g)
		}
	}
	if s.Health != nil && len(s.Health.Exec) > 0 {
		v.at(o, ".health.exec", "is not supported for a container yet: probe it with http or tcp (a container runs on the host network by default)")
	}
}

func (v validator) health(o Origin, s Service) {
	h := s.Health
	n := 0
	if h.HTTP != "" {
		n++
		v.refs(o, ".health.http", h.HTTP)
		for _, u := range sampleReplicas(s, h.HTTP) {
			if err := checkProbeURL(u); err != nil {
				v.at(o, ".health.http", "invalid URL %q%s: %v; use http://HOST:PORT/PATH", h.HTTP, expanded(h.HTTP, u), err)
				break
			}
		}
	}
	if h.TCP != "" {
		n++
		v.refs(o, ".health.tcp", h.TCP)
		for _, a := range sampleReplicas(s, h.TCP) {
			if err := checkProbeAddr(a); err != nil {
				v.at(o, ".health.tcp", "invalid address %q%s: %v; use HOST:PORT", h.TCP, expanded(h.TCP, a), err)
				break
			}
		}
	}
	if len(h.Exec) > 0 {
		n++
		for i, c := range h.Exec {
			v.refs(o, fmt.Sprintf(".health.exec[%d]", i), c)
		}
	}
	if n != 1 {
		v.at(o, ".health", "set exactly one of http, tcp or exec (found %d)", n)
	}
	if h.FailureThreshold < 0 {
		v.at(o, ".health.failureThreshold", "must be 0 or more, got %d", h.FailureThreshold)
	}
}

// refs checks every ${…} in s.
func (v validator) refs(o Origin, field, s string) {
	for _, m := range reference().FindAllStringSubmatch(s, -1) {
		if m[1] == "replica" {
			continue
		}
		v.ref(o, field, m[1])
	}
}

// ref checks one model:NAME or file:PATH reference.
func (v validator) ref(o Origin, field, r string) {
	kind, target, _ := strings.Cut(r, ":")
	switch kind {
	case "model":
		if !v.models[target] && !v.anyRef {
			v.at(o, field, "references model %q, which this device does not declare", target)
		}
	case "file":
		if !v.files[target] && !v.anyRef {
			v.at(o, field, "references file %q, which this device does not declare", target)
		}
	default:
		hint := ""
		if mistyped(r) {
			hint = "; a variable is ${var:NAME}, a label ${label:KEY}"
		}
		v.at(o, field, "unknown reference %q: use model:NAME, file:PATH or (in command and env) ${replica}%s", r, hint)
	}
}
