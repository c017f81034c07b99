package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = ""
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			c := commit
			if c == "" {
				c = "unknown"
				if bi, ok := debug.ReadBuildInfo(); ok {
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" {
							c = s.Value
						}
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tend %s (commit %s, %s %s/%s)\n", version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
