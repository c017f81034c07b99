package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tend-dev/tend/manifest"
)

// Overrides are the config fields set on the command line or through
// TEND_* environment variables. A nil field is not set.
type Overrides struct {
	Device, Repo, Ref, Root, StateDir, Schedule, Listen, DockerConfig *string
	// Paths set source.path (one) or source.paths (several), in place of
	// both.
	Paths, AllowPaths, InsecureRegistries []string
	Jitter                                *manifest.Duration
	MaxRate                               *manifest.Rate
	AllowEmpty, AllowRewind               *bool
	KeepVersions                          *int
}

// Load reads the agent config from path (or manifest.DefaultConfig when
// path is empty and that file exists), applies the overrides and the
// defaults, and validates the result: the config as the agent runs with
// it.
func Load(path string, o Overrides) (*manifest.AgentConfig, error) {
	c, err := readConfig(path, o)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil && c.Device == "" {
		return nil, fmt.Errorf("no device name: set device in agent.yaml or --device (hostname: %w)", err)
	}
	c.SetDefaults(host)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadCI reads what CI (diff, validate --all, publish) takes from the
// agent config, as Load finds it, with the overrides: the source and the
// registries. Nothing that belongs to one node (device name, stateDir,
// labels) is defaulted or checked: CI has none. The source defaults to the
// current folder.
func LoadCI(path string, o Overrides) (*manifest.AgentConfig, error) {
	ci := Overrides{Repo: o.Repo, Ref: o.Ref, Paths: o.Paths, AllowPaths: o.AllowPaths,
		InsecureRegistries: o.InsecureRegistries, DockerConfig: o.DockerConfig, AllowEmpty: o.AllowEmpty}
	c, err := readConfig(path, ci)
	if err != nil {
		return nil, err
	}
	if c.Source.URL == "" {
		c.Source.URL = "."
	}
	if err := c.ValidateCI(); err != nil {
		return nil, err
	}
	return c, nil
}

// readConfig reads the config file (path, or manifest.DefaultConfig when
// it exists)
// and applies the overrides.
func readConfig(path string, o Overrides) (*manifest.AgentConfig, error) {
	c := &manifest.AgentConfig{}
	explicit := path != ""
	if !explicit {
		path = manifest.DefaultConfig
	}
	loaded, err := manifest.LoadConfig(path)
	switch {
	case err == nil:
		c = loaded
	case !explicit && errors.Is(err, fs.ErrNotExist):
		// No config file: flags and defaults only.
	default:
		return nil, err
	}
	o.apply(c)
	return c, nil
}

func (o Overrides) apply(c *manifest.AgentConfig) {
	set := func(dst *string, v *string, field, flag string) {
		if v != nil {
			*dst = *v
			c.Overridden(field, flag)
		}
	}
	abs := func(v *string) *string {
		if v == nil || *v == "" {
			return v
		}
		a, err := filepath.Abs(*v)
		if err != nil {
			return v
		}
		return &a
	}
	o.Root, o.StateDir, o.DockerConfig = abs(o.Root), abs(o.StateDir), abs(o.DockerConfig)
	set(&c.Device, o.Device, "device", "--device")
	set(&c.Source.URL, o.Repo, "source.url", "--repo")
	set(&c.Source.Ref, o.Ref, "source.ref", "--ref")
	if o.Paths != nil {
		c.Source.Path, c.Source.Paths = "", nil
		if len(o.Paths) == 1 {
			c.Source.Path = o.Paths[0]
		} else {
			c.Source.Paths = o.Paths
		}
		c.Overridden("source.path", "--path")
		c.Overridden("source.paths", "--path")
	}
	set(&c.Root, o.Root, "root", "--root")
	set(&c.StateDir, o.StateDir, "stateDir", "--state-dir")
	set(&c.Schedule, o.Schedule, "schedule", "--schedule")
	set(&c.Listen, o.Listen, "listen", "--listen")
	if o.AllowPaths != nil {
		c.AllowPaths = o.AllowPaths
		c.Overridden("allowPaths", "--allow-path")
	}
	if o.InsecureRegistries != nil {
		c.Registries.Insecure = o.InsecureRegistries
	}
	if o.Jitter != nil {
		c.Jitter = *o.Jitter
	}
	if o.AllowEmpty != nil {
		c.AllowEmpty = *o.AllowEmpty
	}
	if o.AllowRewind != nil {
		c.Source.AllowRewind = *o.AllowRewind
	}
	if o.MaxRate != nil {
		c.Downloads.MaxRate = *o.MaxRate
		c.Overridden("downloads.maxRate", "--max-rate")
	}
	if o.KeepVersions != nil {
		n := *o.KeepVersions
		c.Models.KeepVersions = &n
		c.Overridden("models.keepVersions", "--keep-versions")
	}
	set(&c.Registries.DockerConfig, o.DockerConfig, "registries.dockerConfig", "--docker-config")
}

// LoadNode reads what the commands that work on this node's state alone
// (status, logs, suspend, resume, retry, state restore) take from the
// agent config, as Load finds it, with the overrides: stateDir and listen, with
// their defaults, and suspend. No other field is needed or checked, so
// they work before the source is set up, and on a node whose config the
// agent refuses.
func LoadNode(path string, o Overrides) (*manifest.AgentConfig, error) {
	c, err := readConfig(path, Overrides{StateDir: o.StateDir, Listen: o.Listen})
	if err != nil {
		return nil, err
	}
	if c.StateDir == "" {
		c.StateDir = manifest.DefaultStateDir
	}
	if c.Listen == "" {
		c.Listen = manifest.DefaultListen
	}
	if err := c.ValidateNode(); err != nil {
		return nil, err
	}
	return c, nil
}
