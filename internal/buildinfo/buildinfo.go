package buildinfo

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
)

// Build is what a binary's version command says of it.
type Build struct {
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

// Of says what ldVersion and ldCommit (the -X values, may be
// empty) and bi (debug.ReadBuildInfo's, may be nil) know of the binary:
// go build in a Git checkout stamps vcs.revision, vcs.time and
// vcs.modified (unless -buildvcs=false), and since Go 1.24 a module
// version made from them; go install module@version stamps the version.
func Of(ldVersion, ldCommit string, bi *debug.BuildInfo) Build {
	b := Build{Version: ldVersion, Commit: ldCommit}
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

// Read is what this binary knows of itself, given the -X values of its
// build.
func Read(ldVersion, ldCommit string) Build {
	bi, _ := debug.ReadBuildInfo()
	return Of(ldVersion, ldCommit, bi)
}

// Line is what the version command of program prints, given the Go
// version and platform:
// tend v0.4.0 (commit 0123…, 2026-01-02T15:04:05Z, modified, go1.26.0 linux/arm64),
// or, built by go install …@v0.4.0, tend v0.4.0 (commit of tag v0.4.0, …).
func (b Build) Line(program, goVersion, platform string) string {
	var s strings.Builder
	c := b.Commit
	switch {
	case c == "" && b.Tag != "":
		c = "of tag " + b.Tag
	case c == "":
		c = "unknown"
	}
	fmt.Fprintf(&s, "%s %s (commit %s", program, b.Version, c)
	if b.Time != "" {
		fmt.Fprintf(&s, ", %s", b.Time)
	}
	if b.Modified {
		s.WriteString(", modified")
	}
	fmt.Fprintf(&s, ", %s %s)", goVersion, platform)
	return s.String()
}
