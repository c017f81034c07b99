package modelkit

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/printable"
)

// pickManifest chooses the manifest of index d for platform: the best
// match of os and architecture (a variant must be equal when both have
// one, and an equal variant beats none); failing that, the only manifest,
// or the only one without a platform.
func pickManifest(d v1.Hash, im *v1.IndexManifest, platform v1.Platform) (v1.Descriptor, error) {
	best, bestRank := -1, 0
	var bare []int
	var offered []string
	for i, m := range im.Manifests {
		p := m.Platform
		if p == nil || p.OS == "" && p.Architecture == "" {
			bare = append(bare, i)
			continue
		}
		if p.OS != "unknown" { // not buildx's attestations
			offered = append(offered, p.String())
		}
		if p.OS != platform.OS || p.Architecture != platform.Architecture {
			continue
		}
		rank := 1
		switch {
		case platform.Variant == "" || p.Variant == "":
		case p.Variant == platform.Variant:
			rank = 2
		default:
			continue
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	switch {
	case best >= 0:
		return im.Manifests[best], nil
	case len(im.Manifests) == 1:
		return im.Manifests[0], nil
	case len(bare) == 1:
		return im.Manifests[bare[0]], nil
	case len(im.Manifests) == 0:
		return v1.Descriptor{}, fmt.Errorf("%w: model index %s lists no manifests", ErrUnknownLayout, d)
	}
	slices.Sort(offered)
	return v1.Descriptor{}, fmt.Errorf("model index %s: %w %s; it offers %s",
		d, ErrNoPlatform, platform, printable.ShortList(slices.Compact(offered), listedItems))
}

// NodePlatform returns this machine's platform, as index manifests name
// them: the OS, the architecture and, for arm, the variant when known.
func NodePlatform() v1.Platform {
	p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	switch runtime.GOARCH {
	case "arm64":
		p.Variant = "v8"
	case "arm":
		cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
		goarm := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "GOARM" {
					goarm = s.Value
				}
			}
		}
		p.Variant = armVariant(string(cpuinfo), goarm)
	}
	return p
}

// armVariant reads the 32-bit arm variant from /proc/cpuinfo ("CPU
// architecture: 7"), or else from the GOARM the binary was built for.
func armVariant(cpuinfo, goarm string) string {
	for line := range strings.Lines(cpuinfo) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "CPU architecture") {
			continue
		}
		switch v = strings.TrimSpace(v); {
		case v == "8" || strings.EqualFold(v, "AArch64"):
			return "v7" // a 32-bit userland on a 64-bit core runs v7 code
		case strings.HasPrefix(v, "7"), strings.HasPrefix(v, "6"), strings.HasPrefix(v, "5"):
			return "v" + v[:1]
		}
	}
	if goarm != "" {
		return "v" + goarm[:1]
	}
	return ""
}
