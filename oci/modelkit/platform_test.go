package modelkit

import (
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
)

func TestPickManifest(t *testing.T) {
	d := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
	desc := func(hex byte, p *v1.Platform) v1.Descriptor {
		return v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(string(hex), 64)}, Platform: p}
	}
	armv6 := desc('6', &v1.Platform{OS: "linux", Architecture: "arm", Variant: "v6"})
	armv7 := desc('7', &v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"})
	arm := desc('a', &v1.Platform{OS: "linux", Architecture: "arm"})
	bare := desc('b', nil)
	amd := desc('c', &v1.Platform{OS: "linux", Architecture: "amd64"})
	node := v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
	tests := []struct {
		name      string
		manifests []v1.Descriptor
		want      v1.Descriptor
		err       string
	}{
		{"equal variant beats none", []v1.Descriptor{arm, armv6, armv7}, armv7, ""},
		{"no variant matches any", []v1.Descriptor{armv6, arm}, arm, ""},
		{"the only manifest", []v1.Descriptor{amd}, amd, ""},
		{"the only one without a platform", []v1.Descriptor{amd, bare}, bare, ""},
		{"another variant does not match", []v1.Descriptor{armv6, amd}, v1.Descriptor{}, "no manifest for this platform linux/arm/v7; it offers linux/amd64, linux/arm/v6"},
		{"empty index", nil, v1.Descriptor{}, "lists no manifests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickManifest(d, &v1.IndexManifest{Manifests: tt.manifests}, node)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNodePlatform(t *testing.T) {
	p := NodePlatform()
	require.Equal(t, runtime.GOOS, p.OS)
	require.Equal(t, runtime.GOARCH, p.Architecture)
	for cpuinfo, want := range map[string]string{
		"processor\t: 0\nCPU architecture: 7\nCPU variant\t: 0x0\n": "v7",
		"CPU architecture: 6TEJ\n":                                  "v6",
		"CPU architecture: 8\n":                                     "v7",
		"model name : x\n":                                          "v6", // from GOARM
	} {
		require.Equal(t, want, armVariant(cpuinfo, "6,softfloat"), cpuinfo)
	}
	require.Empty(t, armVariant("", ""))
}
