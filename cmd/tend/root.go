package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/internal/logging"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// globals are the values of the flags that set agent config fields, and
// of the logging flags (see addFlags).
type globals struct {
	config    string
	logFormat string
	logLevel  string

	device, repo, ref, root, stateDir, schedule, listen string
	paths, allowPaths, insecure                         []string
	jitter, dockerConfig, maxRate                       string
	allowEmpty, allowRewind                             bool
	keepVersions                                        int
	lockTimeout                                         time.Duration
	flags                                               *pflag.FlagSet

	progress *progressLine // on stderr when it is a terminal, set by setup
}

func newRootCommand() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "tend",
		Short:         "Keep edge devices at the state declared for them in Git",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.flags = cmd.Flags()
			return envDefaults(cmd.Flags())
		},
	}
	root.AddCommand(
		newValidateCommand(g),
		newRenderCommand(g),
		newDiffCommand(g),
		newPublishCommand(g),
		newNotifyCommand(g),
		newHubMovedCommand(),
		newFleetCommand(g),
		newSchemaCommand(),
		newVersionCommand(),
	)
	// The commands that work on this node: Linux only (see nodeOnly).
	root.AddCommand(nodeOnly(
		newLogsCommand(g),
		newStatusCommand(g),
		newSuspendCommand(g),
		newResumeCommand(g),
		newRetryCommand(g),
		newStateCommand(g),
		newPlanCommand(g),
		newApplyCommand(g),
		newAgentCommand(g),
	)...)
	return root
}

// envDefaults sets every config or logging flag a command uses that was not
// given on the command line from its TEND_<FLAG> environment variable
// (repeatable flags: comma-separated). A subcommand's own flags (--format)
// take no environment variable: one TEND_FORMAT cannot suit both render
// (yaml) and plan (text).
func envDefaults(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if _, config := configFlags[f.Name]; f.Changed || f.Hidden || err != nil || !config {
			return
		}
		name := "TEND_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v := os.Getenv(name)
		if v == "" {
			return // unset and empty are the same: no default
		}
		values := []string{v}
		if f.Value.Type() == "stringArray" {
			values = strings.Split(v, ",")
		}
		for _, v := range values {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", name, v, e)
				return
			}
		}
	})
	return err
}

// loadConfig reads the agent config with the flags that were set.
func (g *globals) loadConfig() (*manifest.AgentConfig, error) {
	o, err := g.overrides()
	if err != nil {
		return nil, err
	}
	return config.Load(g.config, o)
}

// overrides are the config fields set by flags (or TEND_* variables).
func (g *globals) overrides() (config.Overrides, error) {
	var o config.Overrides
	str := func(name string, v *string) *string {
		if g.set(name) {
			return v
		}
		return nil
	}
	o.Device, o.Repo, o.Ref = str("device", &g.device), str("repo", &g.repo), str("ref", &g.ref)
	if g.set("path") {
		o.Paths = g.paths
	}
	o.Root, o.StateDir, o.Schedule, o.Listen = str("root", &g.root), str("state-dir", &g.stateDir), str("schedule", &g.schedule), str("listen", &g.listen)
	o.DockerConfig = str("docker-config", &g.dockerConfig)
	if g.set("allow-path") {
		o.AllowPaths = g.allowPaths
	}
	if g.set("insecure-registry") {
		o.InsecureRegistries = g.insecure
	}
	if g.set("allow-empty") {
		o.AllowEmpty = &g.allowEmpty
	}
	if g.set("allow-rewind") {
		o.AllowRewind = &g.allowRewind
	}
	if g.set("keep-versions") {
		o.KeepVersions = &g.keepVersions
	}
	err := g.parsedOverrides(&o) // not in the return: o could be read before the call
	return o, err
}

// parsedOverrides sets in o the fields of the flags whose values are
// parsed (--jitter, --max-rate). A value is checked even where the command
// ignores the flag: a typo fails before any work, not when the same line
// later starts an agent.
func (g *globals) parsedOverrides(o *config.Overrides) error {
	if g.flags != nil && g.flags.Changed("jitter") {
		var d manifest.Duration
		if err := d.UnmarshalJSON([]byte(fmt.Sprintf("%q", g.jitter))); err != nil {
			return fmt.Errorf("--jitter (or TEND_JITTER): %w", err)
		}
		if g.set("jitter") {
			o.Jitter = &d
		}
	}
	if g.flags != nil && g.flags.Changed("max-rate") {
		r, err := manifest.ParseRate(g.maxRate)
		if err != nil {
			return fmt.Errorf("--max-rate (or TEND_MAX_RATE): %w", err)
		}
		if g.set("max-rate") {
			o.MaxRate = &r
		}
	}
	return nil
}

// nodeConfig loads what the commands that work on this node's state alone
// take from the config and the flags (see config.LoadNode).
func (g *globals) nodeConfig() (*manifest.AgentConfig, error) {
	o, err := g.overrides()
	if err != nil {
		return nil, err
	}
	c, err := config.LoadNode(g.config, o)
	if err != nil {
		return nil, err
	}
	// A stateDir a newer tend wrote is refused before it is read.
	if err := statedir.Dir(c.StateDir).Check(); err != nil {
		return nil, err
	}
	return c, nil
}

// setup loads the config and makes the logger every command needs.
func (g *globals) setup(cmd *cobra.Command) (*manifest.AgentConfig, *slog.Logger, error) {
	c, err := g.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	w := cmd.ErrOrStderr()
	if f, ok := w.(*os.File); ok && g.logFormat != "json" {
		// Model pulls show their progress on a terminal, between the
		// logs, never in JSON logs or redirected output.
		if g.progress = newProgressLine(f); g.progress != nil {
			w = g.progress.logWriter()
		}
	}
	log, err := g.logger(w)
	if err != nil {
		return nil, nil, err
	}
	return c, log, nil
}

// logger returns the slog logger the flags ask for, writing to w.
func (g *globals) logger(w io.Writer) (*slog.Logger, error) {
	f, ok := w.(*os.File)
	return logging.New(w, g.logFormat, g.logLevel, (ok && isTerminal(f)) || g.progress != nil)
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// reconciler returns a Reconciler for c with the flags' settings.
func (g *globals) reconciler(c *manifest.AgentConfig, log *slog.Logger) *agent.Reconciler {
	b := thisBuild()
	r := &agent.Reconciler{Config: c, Logger: log, LockTimeout: g.lockTimeout, Version: b.Version, Commit: b.Commit}
	if g.progress != nil {
		r.Meter = g.progress
	}
	return r
}

// stateOptions are how tend retry and tend state restore lock the
// stateDir, with the flags' settings.
func (g *globals) stateOptions() applier.StateOptions {
	b := thisBuild()
	return applier.StateOptions{LockTimeout: g.lockTimeout, Version: b.Version, Commit: b.Commit}
}

// oneOf checks a flag's value against the accepted ones, before any work.
func oneOf(flag, value string, accepted ...string) error {
	for _, a := range accepted {
		if value == a {
			return nil
		}
	}
	return fmt.Errorf("%s %q: use %s", flag, value, strings.Join(accepted, " or "))
}
