package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newHubMovedCommand is tend hub, which the hub's own binary replaced: it
// says what to run instead, for one release, and is then removed.
func newHubMovedCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "hub",
		Short:              "Moved: the hub is its own binary, tend-hub",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return fmt.Errorf("the hub is its own binary now: run %q (from the tend-hub package, archive or image; go install github.com/tend-dev/tend/cmd/tend-hub@latest)",
				strings.TrimSpace("tend-hub "+strings.Join(args, " ")))
		},
	}
}
