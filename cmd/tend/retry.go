package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/applier"
)

const retryLong = "A commit whose apply was rolled back on this node (a service did not become healthy) is\n" +
	"quarantined: the node holds its last applied commit and does not apply that one again.\n" +
	"A model version rolled back at the applied commit (its tag or semver policy moved to it) is\n" +
	"quarantined by its digest: the model keeps the highest version that was not rolled back.\n" +
	"So is a container service's image whose tag moved to one that was rolled back: the service\n" +
	"keeps the image it runs.\n" +
	"retry forgets the quarantine of COMMIT (a full or abbreviated hash), of one model version\n" +
	"(model/NAME@sha256:DIGEST) or image (service/NAME@sha256:DIGEST), the digest full or\n" +
	"abbreviated, or of everything quarantined\n" +
	"when none is given, so the next tick or tend apply tries it again, and asks a running\n" +
	"agent to reconcile now."

func newRetryCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retry [COMMIT | model/NAME@sha256:DIGEST | service/NAME@sha256:DIGEST]",
		Short: "Try again a commit, model version or image this node rolled back, without a new one",
		Long:  retryLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return retry(cmd, g, args)
		},
	}
	g.addFlags(cmd, logFlags, []string{"state-dir", "listen", "lock-timeout"})
	return cmd
}

// retry forgets the quarantine args name (applier.Retry), says what it
// forgot, and asks a running agent to tick now.
func retry(cmd *cobra.Command, g *globals, args []string) error {
	c, err := g.nodeConfig()
	if err != nil {
		return err
	}
	key := ""
	if len(args) == 1 {
		key = args[0]
	}
	cleared, err := applier.Retry(cmd.Context(), c.StateDir, key, g.stateOptions())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if len(cleared) == 0 {
		fmt.Fprintln(out, "Nothing is quarantined on this node.")
		return nil
	}
	for _, q := range cleared {
		fmt.Fprintf(out, "Retrying %s (rolled back at %s: %s).\n", q.Revision, q.At.UTC().Format(time.RFC3339), q.Reason)
	}
	if poke(c.Listen) {
		fmt.Fprintln(out, "The agent reconciles now.")
	} else {
		fmt.Fprintln(out, "The next tick or tend apply tries it again.")
	}
	return nil
}
