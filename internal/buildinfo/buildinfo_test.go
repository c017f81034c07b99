package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuildInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(
		"-trimpath", "true", "vcs", "git", "vcs.revision", "0123456789abcdef0123456789abcdef01234567",
		"vcs.time", "2026-01-02T15:04:05Z", "vcs.modified", "true")}
	for _, tc := range []struct {
		name              string
		ldVersion, commit string
		bi                *debug.BuildInfo
		want              string
	}{
		{name: "make build: the ldflags win", ldVersion: "v0.4.0-3-gabcdef0", commit: "abcdef0123", bi: stamped,
			want: "tend v0.4.0-3-gabcdef0 (commit abcdef0123, go1.26.0 linux/arm64)"},
		{name: "go build in a checkout: the VCS stamp", bi: stamped,
			want: "tend dev (commit 0123456789abcdef0123456789abcdef01234567, 2026-01-02T15:04:05Z, modified, go1.26.0 linux/arm64)"},
		{name: "a clean tree", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(
			"vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.time", "2026-01-02T15:04:05Z", "vcs.modified", "false")},
			want: "tend dev (commit 0123456789abcdef0123456789abcdef01234567, 2026-01-02T15:04:05Z, go1.26.0 linux/arm64)"},
		{name: "go install of a tag: the module version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			want: "tend v0.4.0 (commit of tag v0.4.0, go1.26.0 linux/arm64)"},
		{name: "go install of a pre-release tag", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0-rc.1"}},
			want: "tend v0.4.0-rc.1 (commit of tag v0.4.0-rc.1, go1.26.0 linux/arm64)"},
		{name: "ldflags version, tag module version: the ldflags commit", ldVersion: "v0.4.0", commit: "abcdef0123",
			bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, want: "tend v0.4.0 (commit abcdef0123, go1.26.0 linux/arm64)"},
		{name: "go install of a commit: the pseudo-version's revision", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1-0.20260102150405-0123456789ab"}},
			want: "tend v0.4.1-0.20260102150405-0123456789ab (commit 0123456789ab, go1.26.0 linux/arm64)"},
		{name: "a pseudo-version with no tag before it", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260102150405-0123456789ab"}},
			want: "tend v0.0.0-20260102150405-0123456789ab (commit 0123456789ab, go1.26.0 linux/arm64)"},
		{name: "ldflags version, stamped commit", ldVersion: "v0.4.0", bi: stamped,
			want: "tend v0.4.0 (commit 0123456789abcdef0123456789abcdef01234567, 2026-01-02T15:04:05Z, modified, go1.26.0 linux/arm64)"},
		{name: "nothing known (-buildvcs=false)", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("-buildvcs", "false")},
			want: "tend dev (commit unknown, go1.26.0 linux/arm64)"},
		{name: "no build info", want: "tend dev (commit unknown, go1.26.0 linux/arm64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Of(tc.ldVersion, tc.commit, tc.bi).Line("tend", "go1.26.0", "linux/arm64"))
		})
	}
}
