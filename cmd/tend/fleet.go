package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/hubclient"
	"github.com/tend-dev/tend/internal/tokenfile"
)

const fleetReleaseLong = "release prints how many devices of each wave applied the release NAME names, and what each device\n" +
	"that rolled it back rolled back and why. NAME is a release key (commit:HASH, model/NAME@sha256:HEX),\n" +
	"a commit (a unique prefix of its hash, bare or as REF@sha1:HASH), or model/NAME@DIGEST|TAG\n" +
	"(service/NAME@DIGEST|TAG; a tag as the devices reported resolving it).\n" +
	"Exit codes: 0 every device it targets applied it, 2 in progress, 1 a device rolled it back (or an error)."

// fleetCmd is tend fleet and the flags of its commands.
type fleetCmd struct {
	hubURL, tokenFile, selector, format string
}

func newFleetCommand(g *globals) *cobra.Command {
	fc := &fleetCmd{}
	fleet := &cobra.Command{Use: "fleet", Short: "Ask tend-hub how the fleet stands", Args: cobra.NoArgs}
	status := &cobra.Command{
		Use:   "status --hub URL [--selector SEL] [--format text|json]",
		Short: "Print the device table of the hub",
		Args:  cobra.NoArgs,
		RunE:  fc.status,
	}
	status.Flags().StringVar(&fc.selector, "selector", "", "only the devices whose labels match: k=v, k!=v, k, !k, comma-separated")
	status.Flags().StringVar(&fc.format, "format", "text", "text or json")
	release := &cobra.Command{
		Use:   "release NAME --hub URL",
		Short: "Print a release's progress per wave",
		Long:  fleetReleaseLong,
		Args:  cobra.ExactArgs(1),
		RunE:  fc.release,
	}
	for _, c := range []*cobra.Command{status, release} {
		g.addFlags(c)
		c.Flags().StringVar(&fc.hubURL, "hub", "", "the URL of tend-hub")
		c.Flags().StringVar(&fc.tokenFile, "read-token-file", "", "file holding the hub's read token")
	}
	fleet.AddCommand(status, release)
	return fleet
}

// client is the client of the hub --hub names, with the read token of
// --read-token-file.
func (fc *fleetCmd) client() (*hubclient.Client, error) {
	c := &hubclient.Client{URL: fc.hubURL}
	if fc.hubURL == "" {
		return nil, fmt.Errorf("--hub is required: the URL of tend-hub, e.g. https://hub.example:8420")
	}
	if fc.tokenFile != "" {
		tok, err := tokenfile.Read(fc.tokenFile, "--read-token-file")
		if err != nil {
			return nil, err
		}
		c.Token = tok
	}
	return c, nil
}

func (fc *fleetCmd) status(cmd *cobra.Command, _ []string) error {
	if fc.format != "text" && fc.format != "json" {
		return fmt.Errorf("--format %q: use text or json", fc.format)
	}
	c, err := fc.client()
	if err != nil {
		return err
	}
	l, err := c.Devices(cmd.Context(), fc.selector)
	if err != nil {
		return err
	}
	if fc.format == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	return hubclient.WriteDevices(cmd.OutOrStdout(), l)
}

func (fc *fleetCmd) release(cmd *cobra.Command, args []string) error {
	c, err := fc.client()
	if err != nil {
		return err
	}
	rd, err := c.Release(cmd.Context(), args[0])
	if err != nil {
		return err
	}
	if err := hubclient.WriteRelease(cmd.OutOrStdout(), rd); err != nil {
		return err
	}
	if v := hubclient.ReleaseVerdict(rd); v != hubclient.VerdictApplied {
		return exitError{code: int(v)}
	}
	return nil
}
