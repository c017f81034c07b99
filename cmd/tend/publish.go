package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/ocisource"
)

func newPublishCommand(g *globals) *cobra.Command {
	var rev string
	cmd := &cobra.Command{
		Use:   "publish [--rev REV] oci://HOST/REPO:TAG",
		Short: "CI: push the fleet repo at a commit as an OCI artifact devices follow",
		Long: "publish pushes the tree of the commit REV names (a branch, tag or commit; default HEAD) to the\n" +
			"registry as an artifact in Flux's format, for devices whose source.url is oci://HOST/REPO:TAG: they\n" +
			"poll it with one manifest HEAD and download it only when it changed. The artifact is reproducible: the\n" +
			"same commit gives the same layer from any clone, and the same digest from any clone that holds its last\n" +
			"100 ancestors (listed for the devices' rewind check). Its revision is REF@sha1:COMMIT, REF being the\n" +
			"branch or tag REV names, the branch checked out for HEAD, or --ref. --repo is a local checkout\n" +
			"(default .), a bare repository or a URL; registry credentials come from --docker-config or docker\n" +
			"login, as for models.\n" +
			"It prints the digest of the artifact's manifest. Exit codes: 0 pushed, 1 error.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			o, err := g.overrides()
			if err != nil {
				return err
			}
			if o.Repo == nil {
				here := "." // the checkout, not the source.url a device's config names
				o.Repo = &here
			}
			if ocisource.IsURL(*o.Repo) {
				return fmt.Errorf("--repo %s: tend publish reads the Git fleet repo (a local checkout, a bare repository or a URL) and pushes to the oci:// URL it is given", *o.Repo)
			}
			o.Ref, o.Paths = nil, nil // a device's ref and paths play no part
			c, err := config.LoadCI(g.config, o)
			if err != nil {
				return err
			}
			repo, done, err := openFleet(cmd.Context(), c, log)
			if err != nil {
				return err
			}
			defer done()
			opts := ocisource.PublishOptions{Registry: config.RegistryOptions(c)}
			if g.set("ref") {
				opts.Ref = g.ref
			}
			pub, err := ocisource.Publish(cmd.Context(), repo, rev, args[0], opts)
			if err != nil {
				return err
			}
			log.Info("published", slog.String("artifact", pub.Ref), slog.String("digest", pub.Digest),
				slog.String("revision", pub.Revision), slog.String("created", pub.Created), slog.Int64("bytes", pub.Size))
			_, err = fmt.Fprintln(cmd.OutOrStdout(), pub.Digest)
			return err
		},
	}
	g.addFlags(cmd, logFlags, []string{"repo", "ref", "insecure-registry", "docker-config"})
	f := cmd.Flags()
	f.StringVar(&rev, "rev", "HEAD", "the commit to publish: a branch, tag or commit")
	f.Lookup("ref").Usage = "the ref the artifact's revision names (REF@sha1:COMMIT; default: the branch or tag --rev names, else HEAD)"
	f.Lookup("repo").Usage = "the fleet repo: a local checkout, a bare repository or a URL (default .)"
	return cmd
}
