package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"github.com/tend-dev/tend/internal/buildinfo"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…"
// (make build). A plain go build or go install leaves them empty, and
// buildInfo reads what the Go toolchain stamped instead.
var (
	version = ""
	commit  = ""
)

// thisBuild is what this binary knows of itself.
func thisBuild() buildinfo.Build { return buildinfo.Read(version, commit) }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Long: "version prints the version and commit set at build time (make build, make release), or else\n" +
			"what the Go toolchain stamped: the Git commit, its time and whether the tree had uncommitted\n" +
			"changes (go build in a checkout), or the module's version (go install …@version), whose commit\n" +
			"it names as the tag's (commit of tag v0.1.0) or, for a pseudo-version, by its short hash.",
		Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), thisBuild().Line("tend", runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH))
		},
	}
}
