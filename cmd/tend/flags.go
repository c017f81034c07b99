package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
)

// configFlags register the flags that set agent config fields (and the
// logging flags), by name. Each takes a TEND_<FLAG> environment variable.
var configFlags = map[string]func(g *globals, f *pflag.FlagSet){
	"config": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.config, "config", "", "agent config file (default "+manifest.DefaultConfig+" when it exists)")
	},
	"log-format": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.logFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text or json")
	},
	"log-level": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	},
	"device": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.device, "device", "", "device name (device; default: the hostname)")
	},
	"repo": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.repo, "repo", "", "fleet repo URL or local path (source.url)")
	},
	"ref": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.ref, "ref", "", "branch, tag or commit to follow; may contain {device} (source.ref; default: the remote's HEAD)")
	},
	"path": func(g *globals, f *pflag.FlagSet) {
		f.StringArrayVar(&g.paths, "path", nil, "folder of the fleet repo this device reads; may contain {device} and {label:KEY}; repeatable (source.path, or source.paths when repeated; default: the repo root)")
	},
	"allow-rewind": func(g *globals, f *pflag.FlagSet) {
		f.BoolVar(&g.allowRewind, "allow-rewind", false, "accept a target commit that does not descend from the last applied one (source.allowRewind)")
	},
	"root": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.root, "root", "", "prefix under which every managed path is placed (root; default "+manifest.DefaultRoot+")")
	},
	"state-dir": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.stateDir, "state-dir", "", "where tend keeps its clone, inventory, status and lock (stateDir; default "+manifest.DefaultStateDir+")")
	},
	"allow-path": func(g *globals, f *pflag.FlagSet) {
		f.StringArrayVar(&g.allowPaths, "allow-path", nil, "absolute path under which manifests may write; repeatable (allowPaths)")
	},
	"allow-empty": func(g *globals, f *pflag.FlagSet) {
		f.BoolVar(&g.allowEmpty, "allow-empty", false, "let a declaration with no resources delete everything tend manages (allowEmpty)")
	},
	"insecure-registry": func(g *globals, f *pflag.FlagSet) {
		f.StringArrayVar(&g.insecure, "insecure-registry", nil, "registry reached over plain HTTP; repeatable (registries.insecure)")
	},
	"docker-config": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.dockerConfig, "docker-config", "", "docker config.json with registry credentials, read before ~/.docker/config.json (registries.dockerConfig)")
	},
	"keep-versions": func(g *globals, f *pflag.FlagSet) {
		f.IntVar(&g.keepVersions, "keep-versions", 0, fmt.Sprintf("model versions kept besides the active one (models.keepVersions; default %d)", manifest.DefaultKeepVersions))
	},
	"max-rate": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.maxRate, "max-rate", "", "cap on the total rate of registry downloads (models, the OCI source), e.g. 2MiB/s (downloads.maxRate; default no cap)")
	},
	"schedule": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.schedule, "schedule", "", "reconcile schedule, a cron spec or \"@every 30s\" (schedule; default \""+manifest.DefaultSchedule+"\")")
	},
	"jitter": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.jitter, "jitter", "", "random delay added to each tick, e.g. 10s (jitter; default 0s)")
	},
	"listen": func(g *globals, f *pflag.FlagSet) {
		f.StringVar(&g.listen, "listen", "", "address of the agent's status server, or off (listen; default "+manifest.DefaultListen+")")
	},
	"lock-timeout": func(g *globals, f *pflag.FlagSet) {
		f.DurationVar(&g.lockTimeout, "lock-timeout", applier.DefaultLockTimeout, "how long to wait for another tend using the same state dir")
	},
}

// Groups of flags, as commands take them.
var (
	// logFlags: every command but version.
	logFlags = []string{"config", "log-format", "log-level"}
	// sourceFlags: commands that read the fleet repo.
	sourceFlags = []string{"repo", "ref", "path", "allow-path", "insecure-registry", "docker-config"}
	// nodeFlags: commands that read this device's state on the node.
	nodeFlags = []string{"root", "state-dir", "lock-timeout", "allow-rewind"}
)

// addFlags registers the named config flags (and groups) on cmd, and every
// other config flag hidden: one set of flags, like one config file, serves
// every command, and a command ignores the fields it does not use. Help
// lists only the flags the command uses.
func (g *globals) addFlags(cmd *cobra.Command, groups ...[]string) {
	used := map[string]bool{}
	for _, names := range groups {
		for _, name := range names {
			used[name] = true
		}
	}
	names := make([]string, 0, len(configFlags))
	for name := range configFlags {
		names = append(names, name)
	}
	sort.Strings(names)
	f := cmd.Flags()
	for _, name := range names {
		configFlags[name](g, f)
		if !used[name] {
			_ = f.MarkHidden(name)
		}
	}
}

// set reports whether the command uses the config flag name and it was
// given (on the command line or by its TEND_ variable).
func (g *globals) set(name string) bool {
	if g.flags == nil {
		return false
	}
	f := g.flags.Lookup(name)
	return f != nil && !f.Hidden && f.Changed
}
