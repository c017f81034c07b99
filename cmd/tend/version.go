package main

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…"
// (make build). A plain go build or go install leaves them empty, and
// buildInfo reads what the Go toolchain stamped instead.
var (
	version = ""
	commit  = ""
)

// build is what `tend version` says of this binary.
type build struct {
	Version string // the ldflags version, else the module's (a tag, or a pseudo-version of the commit), else "dev"
	Commit  string // the ldflags commit, else vcs.revision, else the pseudo-version's; "" when unknown
	Time    string // vcs.time: when the commit was made; "" when unknown
	// Tag is the module version when it is a tag and no commit is known
	// (go install …@v0.1.0 stamps the version, not the commit): the
	// commit is the tag's, which the binary cannot name.
	Tag      string
	Modified bool // vcs.modified: built from a tree with uncommitted changes
}

// pseudoRev is the revision at the end of a pseudo-version,
// v0.0.0-20260102150405-0123456789ab (what go install module@commit builds).
var pseudoRev = regexp.MustCompile(`-(?:\d+\.)?\d{14}-([0-9a-f]{12})(?:\+incompatible)?$`)

// buildInfo says what ldVersion and ldCommit (the -X values, may be
// empty) and bi (debug.ReadBuildInfo's, may be nil) know of the binary:
// go build in a Git checkout stamps vcs.revision, vcs.time and
// vcs.modified (unless -buildvcs=false), and since Go 1.24 a module
// version made from them; go install module@version stamps the version.
func buildInfo(ldVersion, ldCommit string, bi *debug.BuildInfo) build {
	b := build{Version: ldVersion, Commit: ldCommit}
	if bi != nil {
		vcs := map[string]string{}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
		if b.Commit == "" {
			b.Commit = vcs["vcs.revision"]
			b.Time = vcs["vcs.time"]
			b.Modified = vcs["vcs.modified"] == "true"
		}
		if v := bi.Main.Version; b.Version == "" && v != "" && v != "(devel)" {
			b.Version = v
			if m := pseudoRev.FindStringSubmatch(v); b.Commit == "" && m != nil {
				b.Commit = m[1]
			} else if b.Commit == "" && m == nil {
				b.Tag = v
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

// thisBuild is what this binary knows of itself.
func thisBuild() build {
	bi, _ := debug.ReadBuildInfo()
	return buildInfo(version, commit, bi)
}

// line is what `tend version` prints, given the Go version and platform:
// tend v0.4.0 (commit 0123…, 2026-01-02T15:04:05Z, modified, go1.26.0 linux/arm64),
// or, built by go install …@v0.4.0, tend v0.4.0 (commit of tag v0.4.0, …).
func (b build) line(goVersion, platform string) string {
	var s strings.Builder
	c := b.Commit
	switch {
	case c == "" && b.Tag != "":
		c = "of tag " + b.Tag
	case c == "":
		c = "unknown"
	}
	fmt.Fprintf(&s, "tend %s (commit %s", b.Version, c)
	if b.Time != "" {
		fmt.Fprintf(&s, ", %s", b.Time)
	}
	if b.Modified {
		s.WriteString(", modified")
	}
	fmt.Fprintf(&s, ", %s %s)", goVersion, platform)
	return s.String()
}

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
			fmt.Fprintln(cmd.OutOrStdout(), thisBuild().line(runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH))
		},
	}
}
