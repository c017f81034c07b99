package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	git "github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

const diffLong = "diff finds every device of the fleet repo at base and at head, renders each device whose folder changed,\n" +
	"and plans head against base as if base were applied: what merging head does to every device. No device,\n" +
	"node or state is needed. Give the source paths the agents read (source.paths), e.g.\n" +
	"--path profiles --path 'devices/{device}': devices are the folders matching the one with {device} as\n" +
	"a wildcard, and the others are shared, read with every device (a change there reaches every device);\n" +
	"or --config with an agent config that names them. With a branch per device, devices are the branches\n" +
	"matching --ref when it contains {device}; then --base or --head may contain {device} too (e.g. --base\n" +
	"'origin/devices/{device}' --head 'devices/{device}'). REV is a branch, tag or commit, origin/main,\n" +
	"HEAD~1. --repo is a local checkout (default .), a bare repository, or a URL. Changed profiles and\n" +
	"Rollout documents are listed with the devices they reach or govern (a rollout paused, its selector,\n" +
	"waves, window, gate or stage), and a device that renders to nothing (no models, files or services)\n" +
	"at head is warned about.\n" +
	"Exit codes: 0 no changes, 2 changes (to a device's plan, or a rollout), 1 error (a device cannot be\n" +
	"planned; the others are still shown)."

// diffCmd is tend diff and its flags.
type diffCmd struct {
	g                  *globals
	base, head, format string
	resolve, showDiff  bool
}

func newDiffCommand(g *globals) *cobra.Command {
	d := &diffCmd{g: g}
	cmd := &cobra.Command{
		Use:   "diff --base REV --head REV",
		Short: "CI: show what merging head does to every device, from Git alone",
		Long:  diffLong,
		Args:  cobra.NoArgs,
		RunE:  d.run,
	}
	g.addFlags(cmd, logFlags, sourceFlags, []string{"allow-empty"})
	f := cmd.Flags()
	f.StringVar(&d.base, "base", "", "revision the change is merged into, e.g. origin/main (required)")
	f.StringVar(&d.head, "head", "", "revision with the change, e.g. HEAD (required)")
	f.StringVar(&d.format, "format", "text", "output format: text, json or markdown (a pull-request comment)")
	f.BoolVar(&d.resolve, "resolve", false, "resolve model refs and container images in their registries: tags to digests and download sizes, signatures checked as models.verify and runtime.verify ask; a missing tag or signature is an error")
	f.BoolVar(&d.showDiff, "diff", false, "show what each update changes: a unified diff of file content (base against head), old and new spec fields; "+
		"on by default with --format markdown (--diff=false turns it off)")
	_ = cmd.MarkFlagRequired("base")
	_ = cmd.MarkFlagRequired("head")
	return cmd
}

func (d *diffCmd) run(cmd *cobra.Command, _ []string) error {
	if err := oneOf("--format", d.format, "text", "json", "markdown"); err != nil {
		return err
	}
	c, log, err := d.g.ciSetup(cmd)
	if err != nil {
		return err
	}
	repo, done, err := openFleet(cmd.Context(), c, log)
	if err != nil {
		return err
	}
	defer done()
	opts := diffOptions(c, d.resolve, log)
	// A pull-request comment shows diffs unless told not to.
	opts.Diff = d.showDiff || d.format == "markdown" && !cmd.Flags().Changed("diff")
	res, err := diff.Run(cmd.Context(), repo, d.base, d.head, opts)
	if err != nil {
		return err
	}
	if err := d.write(cmd.OutOrStdout(), res); err != nil {
		return err
	}
	if failed := res.Errors(); len(failed) > 0 {
		errs := make([]error, len(failed))
		for i, dev := range failed {
			errs[i] = dev.Err
		}
		return fmt.Errorf("%s cannot be planned:\n%w", planner.Count(len(failed), "device"), errors.Join(errs...))
	}
	if res.Changes() {
		return exitError{code: 2}
	}
	return nil
}

// write prints res in the format asked for.
func (d *diffCmd) write(out io.Writer, res *diff.Result) error {
	switch d.format {
	case "json":
		return diff.WriteJSON(out, res)
	case "markdown":
		return diff.WriteMarkdown(out, res, diff.MarkdownOptions{})
	}
	return diff.WriteText(out, res)
}

// ciSetup reads what diff and validate --all take from the agent config
// and the flags (see config.LoadCI).
func (g *globals) ciSetup(cmd *cobra.Command) (*manifest.AgentConfig, *slog.Logger, error) {
	log, err := g.logger(cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	o, err := g.overrides()
	if err != nil {
		return nil, nil, err
	}
	c, err := config.LoadCI(g.config, o)
	if err != nil {
		return nil, nil, err
	}
	return c, log, nil
}

// openFleet opens the fleet repo: a local checkout in place, a URL
// mirrored into a temp folder that done removes.
func openFleet(ctx context.Context, c *manifest.AgentConfig, log *slog.Logger) (*git.Repository, func(), error) {
	dir, err := os.MkdirTemp("", "tend-fleet-")
	if err != nil {
		return nil, nil, err
	}
	done := func() { _ = os.RemoveAll(dir) }
	src := gitsource.Source{URL: c.Source.URL, Auth: config.GitAuth(c)}
	if t := c.Source.Timeout.D(); t > 0 && !manifest.IsLocalPath(c.Source.URL) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	repo, err := diff.Open(ctx, src, dir, log)
	if err != nil {
		done()
		return nil, nil, err
	}
	return repo, done, nil
}

// diffOptions are the diff package's options from the config and flags.
func diffOptions(c *manifest.AgentConfig, resolve bool, log *slog.Logger) diff.Options {
	return diff.Options{
		Path:        c.Source.Path,
		Paths:       c.Source.Paths,
		Ref:         c.Source.Ref,
		Resolve:     resolve,
		Registry:    config.RegistryOptions(c),
		Verify:      c.Models.Verify,
		ImageVerify: c.Runtime.Verify,
		AllowEmpty:  c.AllowEmpty,
		AllowPaths:  c.AllowPaths,
		Logger:      log,
	}
}
