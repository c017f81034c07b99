package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/ocisource"
)

const publishLong = "publish pushes the tree of the commit REV names (a branch, tag or commit; default HEAD) to the\n" +
	"registry as an artifact in Flux's format, for devices whose source.url is oci://HOST/REPO:TAG: they\n" +
	"poll it with one manifest HEAD and download it only when it changed. The artifact is reproducible: the\n" +
	"same commit gives the same layer from any clone, and the same digest from any clone that holds its last\n" +
	"100 ancestors (listed for the devices' rewind check). Its revision is REF@sha1:COMMIT, REF being the\n" +
	"branch or tag REV names, the branch checked out for HEAD, or --ref. --repo is a local checkout\n" +
	"(default .), a bare repository or a URL; registry credentials come from --docker-config or docker\n" +
	"login, as for models.\n" +
	"It prints the digest of the artifact's manifest. Exit codes: 0 pushed, 1 error."

// publishCmd is tend publish and its flags.
type publishCmd struct {
	g   *globals
	rev string
}

func newPublishCommand(g *globals) *cobra.Command {
	p := &publishCmd{g: g}
	cmd := &cobra.Command{
		Use:   "publish [--rev REV] oci://HOST/REPO:TAG",
		Short: "CI: push the fleet repo at a commit as an OCI artifact devices follow",
		Long:  publishLong,
		Args:  cobra.ExactArgs(1),
		RunE:  p.run,
	}
	g.addFlags(cmd, logFlags, []string{"repo", "ref", "insecure-registry", "docker-config"})
	f := cmd.Flags()
	f.StringVar(&p.rev, "rev", "HEAD", "the commit to publish: a branch, tag or commit")
	f.Lookup("ref").Usage = "the ref the artifact's revision names (REF@sha1:COMMIT; default: the branch or tag --rev names, else HEAD)"
	f.Lookup("repo").Usage = "the fleet repo: a local checkout, a bare repository or a URL (default .)"
	return cmd
}

func (p *publishCmd) run(cmd *cobra.Command, args []string) error {
	log, err := p.g.logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	c, err := p.config()
	if err != nil {
		return err
	}
	repo, done, err := openFleet(cmd.Context(), c, log)
	if err != nil {
		return err
	}
	defer done()
	opts := ocisource.PublishOptions{Registry: config.RegistryOptions(c)}
	if p.g.set("ref") {
		opts.Ref = p.g.ref
	}
	pub, err := ocisource.Publish(cmd.Context(), repo, p.rev, args[0], opts)
	if err != nil {
		return err
	}
	log.Info("published", slog.String("artifact", pub.Ref), slog.String("digest", pub.Digest),
		slog.String("revision", pub.Revision), slog.String("created", pub.Created), slog.Int64("bytes", pub.Size))
	_, err = fmt.Fprintln(cmd.OutOrStdout(), pub.Digest)
	return err
}

// config is what publish takes from the agent config and the flags: the
// Git fleet repo (--repo, default the current folder) and the registries.
func (p *publishCmd) config() (*manifest.AgentConfig, error) {
	o, err := p.g.overrides()
	if err != nil {
		return nil, err
	}
	if o.Repo == nil {
		here := "." // the checkout, not the source.url a device's config names
		o.Repo = &here
	}
	if ocisource.IsURL(*o.Repo) {
		return nil, fmt.Errorf("--repo %s: tend publish reads the Git fleet repo (a local checkout, a bare repository or a URL) and pushes to the oci:// URL it is given", *o.Repo)
	}
	o.Ref, o.Paths = nil, nil // a device's ref and paths play no part
	return config.LoadCI(p.g.config, o)
}
