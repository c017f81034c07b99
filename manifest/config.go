package manifest

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// AgentConfig is the agent's configuration, /etc/tend/agent.yaml.
type AgentConfig struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Device     string            `json:"device,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Source     SourceConfig      `json:"source"`
	Schedule   string            `json:"schedule,omitempty"`
	Jitter     Duration          `json:"jitter,omitempty"`
	StateDir   string            `json:"stateDir,omitempty"`
	Root       string            `json:"root,omitempty"`
	AllowPaths []string          `json:"allowPaths,omitempty"`
	AllowEmpty bool              `json:"allowEmpty,omitempty"`
	Registries Registries        `json:"registries,omitempty"`
	Models     ModelsConfig      `json:"models,omitempty"`
	// Downloads bounds what tend downloads from registries.
	Downloads Downloads `json:"downloads,omitempty"`
	Listen    string    `json:"listen,omitempty"`
	// Runtime says where services with image: run.
	Runtime RuntimeConfig `json:"runtime,omitempty"`
	// Report, when set, posts the status document to a collector.
	Report *Report `json:"report,omitempty"`
	// Suspend stops applies; drift is still observed and reported.
	Suspend bool `json:"suspend,omitempty"`
	// Notify, when set, has the agent tick as soon as CI says the fleet
	// changed (tend notify), besides its schedule.
	Notify *Notify `json:"notify,omitempty"`
	// MaxLockWait bounds how long a release waits for a service's
	// updateLock, counted from the first tick the lock held it; then the
	// release is taken anyway, and a warning logged. Default 1h
	// (DefaultMaxLockWait).
	MaxLockWait Duration `json:"maxLockWait,omitempty"`

	file    string            // where the config was read from, for error messages
	lines   map[string]int    // field path → line in file
	origins map[string]string // field → the flag that overrode it
}

// Overridden records that field (e.g. "allowPaths", "source.url") was set
// by flag, so errors about it name the flag instead of the file.
func (c *AgentConfig) Overridden(field, flag string) {
	if c.origins == nil {
		c.origins = map[string]string{}
	}
	c.origins[field] = flag
}

// Report says where and how often the agent posts its status.
type Report struct {
	URL string `json:"url" jsonschema:"required"`
	// Interval is the longest time between two posts; a change of status
	// is posted at once. Default DefaultReportInterval.
	Interval Duration `json:"interval,omitempty"`
	// Headers are sent with every post (e.g. Authorization); their values
	// are never logged.
	Headers map[string]string `json:"headers,omitempty"`
	// TokenFile is the absolute path of a file holding a bearer token
	// (tend-hub token create prints one): every post carries
	// "Authorization: Bearer TOKEN", read from the file at each post,
	// unless headers set Authorization. Its value is never logged.
	TokenFile string `json:"tokenFile,omitempty"`
}

// DefaultReportInterval is the longest time between two status posts.
const DefaultReportInterval = 5 * time.Minute

// ModelsConfig says how model artifacts are kept and checked.
type ModelsConfig struct {
	// KeepVersions is how many versions besides the active one stay
	// materialised, so a rollback is a symlink swap.
	KeepVersions *int `json:"keepVersions,omitempty" jsonschema:"minimum=0"`
	// VerifyInterval is how often every file of an active model is
	// re-hashed; between deep checks only a stat fingerprint is compared.
	VerifyInterval Duration `json:"verifyInterval,omitempty"`
	// Parallel bounds the blobs of one model downloaded at once.
	Parallel int `json:"parallel,omitempty" jsonschema:"minimum=0"`
	// Verify is the signature every model must carry before it is
	// staged; a model's own verify adds to it.
	Verify *ArtifactVerify `json:"verify,omitempty"`
}

// Downloads bounds what tend downloads from registries.
type Downloads struct {
	// MaxRate caps the total rate of everything tend downloads from
	// registries, shared by every download of the process: model blobs,
	// the OCI fleet artifact, manifests and tag lists. Bytes per second
	// with a unit, e.g. "2MiB/s", "500KiB/s" or "1MB/s"; unset, no cap.
	// Container images are pulled by the engine and not capped.
	MaxRate Rate `json:"maxRate,omitzero"`
}

// Model defaults.
const (
	DefaultKeepVersions   = 2
	DefaultVerifyInterval = 24 * time.Hour
	DefaultModelParallel  = 3
)

// Registries configures OCI registry access.
type Registries struct {
	Insecure     []string `json:"insecure,omitempty"`
	DockerConfig string   `json:"dockerConfig,omitempty"`
}

// RuntimeConfig configures the container engine of services with image:.
type RuntimeConfig struct {
	Docker DockerRuntime `json:"docker,omitempty"`
	// Verify is the signature every container image must carry before it
	// is pulled; a service's own verify adds to it.
	Verify *ArtifactVerify `json:"verify,omitempty"`
}

// DockerRuntime is a Docker Engine API endpoint: Docker's socket, or
// Podman's compatible one.
type DockerRuntime struct {
	// Host is the engine's address, unix:///var/run/docker.sock by
	// default; DOCKER_HOST in tend's environment sets it too.
	Host string `json:"host,omitempty"`
}

// DefaultDockerHost is the engine a container service runs on when
// neither runtime.docker.host nor DOCKER_HOST names one.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// DockerHost returns the engine's address: runtime.docker.host, else
// DOCKER_HOST from env, else DefaultDockerHost.
func (c *AgentConfig) DockerHost(env func(string) string) string {
	if h := c.Runtime.Docker.Host; h != "" {
		return h
	}
	if h := env("DOCKER_HOST"); h != "" {
		return h
	}
	return DefaultDockerHost
}

// Defaults for AgentConfig fields left empty.
const (
	DefaultSchedule = "@every 30s"
	DefaultStateDir = "/var/lib/tend"
	DefaultRoot     = "/"
	DefaultListen   = "127.0.0.1:9469"
	DefaultConfig   = "/etc/tend/agent.yaml"
)

// ParseConfig reads an AgentConfig document.
func ParseConfig(file string, data []byte) (*AgentConfig, error) {
	docs, err := splitDocuments(file, data)
	if err != nil {
		return nil, Errors{err.(*Error)}
	}
	if len(docs) != 1 {
		return nil, Errors{{File: file, Msg: fmt.Sprintf("expected one AgentConfig document, found %d", len(docs))}}
	}
	api, kind, line := header(docs[0])
	if kind != KindAgentConfig || api != APIVersion {
		return nil, Errors{{File: file, Line: line, Msg: kindError(api, kind, KindAgentConfig)}}
	}
	c := AgentConfig{file: file}
	info, errs := decodeDocument(file, len(data), docs[0], &c)
	if len(errs) > 0 {
		return nil, errs
	}
	c.lines = info.lines
	if u := c.Source.URL; IsLocalPath(u) && !filepath.IsAbs(u) {
		// A relative repo path in a config file is relative to that file,
		// not to wherever tend happens to be started.
		if abs, err := filepath.Abs(file); err == nil {
			c.Source.URL = filepath.Join(filepath.Dir(abs), u)
		}
	}
	return &c, nil
}

// LoadConfig reads the AgentConfig at path.
func LoadConfig(path string) (*AgentConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read agent config: %w", err)
	}
	return ParseConfig(path, data)
}

// SetDefaults fills every empty field with its default; hostname is the
// default device name.
func (c *AgentConfig) SetDefaults(hostname string) {
	c.APIVersion, c.Kind = APIVersion, KindAgentConfig
	if c.Device == "" {
		c.Device = hostname
	}
	if c.Schedule == "" {
		c.Schedule = DefaultSchedule
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Source.Timeout == 0 {
		c.Source.Timeout = Duration(DefaultSourceTimeout)
	}
	if c.Models.KeepVersions == nil {
		n := DefaultKeepVersions
		c.Models.KeepVersions = &n
	}
	if c.Models.VerifyInterval == 0 {
		c.Models.VerifyInterval = Duration(DefaultVerifyInterval)
	}
	if c.Models.Parallel == 0 {
		c.Models.Parallel = DefaultModelParallel
	}
	if c.Report != nil && c.Report.Interval == 0 {
		c.Report.Interval = Duration(DefaultReportInterval)
	}
	if c.MaxLockWait == 0 {
		c.MaxLockWait = Duration(DefaultMaxLockWait)
	}
}

// DefaultSourceTimeout bounds one fetch of the fleet repo.
const DefaultSourceTimeout = 60 * time.Second

// DefaultMaxLockWait is how long a release waits for a service's update
// lock when the config sets no maxLockWait.
const DefaultMaxLockWait = time.Hour

// Validate checks the config after defaults and overrides are applied.
func (c *AgentConfig) Validate() error {
	var errs Errors
	if len(c.Device) > 253 || !deviceName().MatchString(c.Device) {
		errs.add("", 0, "device", "invalid device name %q: use letters, digits, '-', '_' and '.'", c.Device)
	}
	if c.Source.URL == "" {
		errs.add("", 0, "source.url", "missing: the fleet repo (https, ssh, scp-like, a local path, or oci://HOST/REPO:TAG for a published artifact); set source.url or --repo")
	}
	c.checkOCI(&errs)
	if !c.checkPaths(&errs) {
		// ExpandSource would read source.paths alone
	} else if _, _, err := c.ExpandSource(); err != nil {
		errs = append(errs, err.(*Error))
	}
	for _, p := range []struct{ field, value string }{{"stateDir", c.StateDir}, {"root", c.Root}} {
		if !filepath.IsAbs(p.value) {
			errs.add("", 0, p.field, "%q is relative: use an absolute path", p.value)
		}
	}
	c.checkAllowPaths(&errs)
	if v := c.Source.Verify; v != nil {
		c.checkSourceVerify(v, &errs)
	}
	for _, b := range []struct {
		field string
		v     *ArtifactVerify
	}{{"models.verify", c.Models.Verify}, {"runtime.verify", c.Runtime.Verify}} {
		if b.v != nil {
			for _, p := range b.v.problems() {
				errs.add("", 0, b.field+p.field, "%s", p.msg)
			}
		}
	}
	if a := c.Source.Auth; a != nil {
		for _, f := range []struct{ field, path string }{
			{"tokenFile", a.TokenFile}, {"usernameFile", a.UsernameFile}, {"passwordFile", a.PasswordFile},
			{"caFile", a.CAFile}, {"sshKeyFile", a.SSHKeyFile}, {"knownHostsFile", a.KnownHostsFile},
		} {
			if f.path != "" && !filepath.IsAbs(f.path) {
				errs.add("", 0, "source.auth."+f.field, "%q must be an absolute path", f.path)
			}
		}
	}
	if n := c.Models.KeepVersions; n != nil && *n < 0 {
		errs.add("", 0, "models.keepVersions", "%d is negative: use 0 to keep only the active version", *n)
	}
	if c.MaxLockWait < 0 {
		errs.add("", 0, "maxLockWait", "%s is negative: use how long a release may wait for a service's update lock, such as 1h", FormatDuration(c.MaxLockWait.D()))
	}
	if c.Models.Parallel < 0 {
		errs.add("", 0, "models.parallel", "%d is negative: use at least 1", c.Models.Parallel)
	}
	if d := c.Registries.DockerConfig; d != "" && !filepath.IsAbs(d) {
		errs.add("", 0, "registries.dockerConfig", "%q must be the absolute path of a docker config.json", d)
	}
	for i, h := range c.Registries.Insecure {
		if h == "" || strings.ContainsAny(h, "/ ") {
			errs.add("", 0, fmt.Sprintf("registries.insecure[%d]", i), "%q is not a registry host: use host or host:port, e.g. registry.local:5000", h)
		}
	}
	if h := c.Runtime.Docker.Host; h != "" {
		if u, err := url.Parse(h); err != nil || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "ssh" && u.Scheme != "http" && u.Scheme != "https") {
			errs.add("", 0, "runtime.docker.host", "%q is not an engine address: use unix:///var/run/docker.sock (Docker), unix:///run/podman/podman.sock (Podman) or tcp://HOST:2376", h)
		}
	}
	if r := c.Report; r != nil {
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.add("", 0, "report.url", "not an http(s) URL: use e.g. https://collector.example.com/v1/status")
		}
		if r.TokenFile != "" && !filepath.IsAbs(r.TokenFile) {
			errs.add("", 0, "report.tokenFile", "%q must be the absolute path of a file holding the token (tend-hub token create prints one)", r.TokenFile)
		}
	}
	if n := c.Notify; n != nil && n.MQTT != nil {
		errs = append(errs, n.MQTT.Check("notify.mqtt")...)
	}
	if _, err := cron.ParseStandard(c.Schedule); err != nil {
		errs.add("", 0, "schedule", "invalid schedule %q: %v; use a cron spec or \"@every 30s\"", c.Schedule, err)
	}
	for _, e := range errs {
		c.locate(e)
	}
	return errs.err()
}

var (
	deviceName  = lazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	placeholder = lazyRegexp(`\{([^{}]*)\}`)
)

// locate says where a config error comes from: the flag that set the field,
// or the config file and line.
func (c *AgentConfig) locate(e *Error) {
	for field, flag := range c.origins {
		if e.Field == field || strings.HasPrefix(e.Field, field+".") || strings.HasPrefix(e.Field, field+"[") {
			e.Field = flag + " (" + e.Field + ")"
			return
		}
	}
	if c.file == "" {
		return
	}
	e.File = c.file
	for f := e.Field; f != ""; {
		if l, ok := c.lines[f]; ok {
			e.Line = l
			return
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return
		}
		f = f[:i]
	}
}

// IsConfig reports whether data holds an AgentConfig (its first document's
// kind), so that tend validate checks a config file given among manifests
// as a config.
func IsConfig(data []byte) bool {
	docs, _ := splitDocuments("", data)
	if len(docs) == 0 {
		return false
	}
	_, kind, _ := header(docs[0])
	return kind == KindAgentConfig
}

// ValidateCI checks the fields CI (diff, validate of files or of every
// device) uses besides the source URL: the source paths and allowPaths.
func (c *AgentConfig) ValidateCI() error {
	var errs Errors
	if IsOCI(c.Source.URL) {
		errs.add("", 0, "source.url", "%q is a published artifact: tend diff and validate --all read the Git fleet repo; pass --repo with its path or URL", c.Source.URL)
	}
	c.checkPaths(&errs)
	c.checkAllowPaths(&errs)
	for _, e := range errs {
		c.locate(e)
	}
	return errs.err()
}

// checkPaths reports whether at most one of source.path and source.paths
// is set.
func (c *AgentConfig) checkPaths(errs *Errors) bool {
	if c.Source.Path != "" && len(c.Source.Paths) > 0 {
		errs.add("", 0, "source.paths", "source.path %q and source.paths are both set: source.path is the shorthand for one path; list every folder in source.paths", c.Source.Path)
		return false
	}
	return true
}

func (c *AgentConfig) checkAllowPaths(errs *Errors) {
	for i, a := range c.AllowPaths {
		if !strings.HasPrefix(a, "/") || path.Clean(a) != a {
			errs.add("", 0, fmt.Sprintf("allowPaths[%d]", i), "%q must be an absolute, clean path such as /etc/infer", a)
		}
	}
}

// ValidateNode checks the fields the commands that work on the node's
// state alone use: stateDir.
func (c *AgentConfig) ValidateNode() error {
	var errs Errors
	if !filepath.IsAbs(c.StateDir) {
		errs.add("", 0, "stateDir", "%q is relative: use an absolute path", c.StateDir)
	}
	for _, e := range errs {
		c.locate(e)
	}
	return errs.err()
}
