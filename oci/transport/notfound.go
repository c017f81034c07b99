package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrtransport "github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/tend-dev/tend/internal/errkind"
	"github.com/tend-dev/tend/internal/printable"
)

// How many tags a not-found error shows.
const (
	closeTagsShown  = 5
	listedTagsShown = 10
)

// notFoundf is an ErrNotFound with a message of its own.
func notFoundf(format string, args ...any) error {
	return errkind.New(ErrNotFound, format, args...)
}

// tagNotFound explains a tag the registry does not have: it lists the
// repository's tags and names those closest to tag. A HEAD request
// answers a missing tag with no body, so the registry's own words add
// nothing.
func tagNotFound(ctx context.Context, ref name.Tag, opts Options) error {
	repo, tag := ref.Context(), ref.TagStr()
	tags, err := listTags(ctx, repo, opts)
	var te *ggcrtransport.Error
	switch {
	case errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, ggcrtransport.NameUnknownErrorCode)):
		return notFoundf("tag %s not found in %s: the repository does not exist; check the ref's registry and path", tag, repo)
	case err != nil:
		return notFoundf("tag %s not found in %s (its tags could not be listed: %v)", tag, repo, err)
	case len(tags) == 0:
		return notFoundf("tag %s not found in %s: the repository has no tags", tag, repo)
	}
	return notFoundf("tag %s not found in %s; close tags: %s (%d %s)", tag, repo,
		printable.ShortList(closest(tag, tags, closeTagsShown), closeTagsShown), len(tags), plural(len(tags), "tag", "tags"))
}

// noMatch explains a semver range no tag of repo matches: the tags that
// are versions, highest first, and those that are not.
func noMatch(repo name.Repository, semverRange string, tags []string) error {
	if len(tags) == 0 {
		return notFoundf("no tag of %s matches %q: the repository has no tags", repo, semverRange)
	}
	versions, others := splitVersions(tags)
	var b strings.Builder
	fmt.Fprintf(&b, "no tag of %s matches %q; its %d %s", repo, semverRange, len(tags), plural(len(tags), "tag", "tags"))
	if len(versions) > 0 {
		fmt.Fprintf(&b, ", highest first: %s", printable.ShortList(versions, listedTagsShown))
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "; not semver, never matched: %s", printable.ShortList(others, listedTagsShown))
	}
	return notFoundf("%s", b.String())
}

// tagVersion is a tag that parses as a semantic version.
type tagVersion struct {
	tag string
	v   *semver.Version
}

// splitVersions returns the tags that are versions, highest first (the
// most specific tag first among equal versions), and the others, sorted.
func splitVersions(tags []string) ([]string, []string) {
	var versions []tagVersion
	var others []string
	for _, t := range tags {
		if v, err := semver.NewVersion(t); err == nil {
			versions = append(versions, tagVersion{t, v})
		} else {
			others = append(others, t)
		}
	}
	slices.SortFunc(versions, byVersionDesc)
	slices.Sort(others)
	names := make([]string, len(versions))
	for i, v := range versions {
		names[i] = v.tag
	}
	return names, others
}

// byVersionDesc orders the highest version first; the same version under
// several tags (v8, v8.0.0): the most specific tag, then by name.
func byVersionDesc(a, b tagVersion) int {
	if c := b.v.Compare(a.v); c != 0 {
		return c
	}
	if len(a.tag) != len(b.tag) {
		return len(b.tag) - len(a.tag)
	}
	return strings.Compare(a.tag, b.tag)
}

// closest returns at most n of tags, nearest to want first. When want is
// a version, the versions nearest to it come first (by major, then minor,
// then patch); every other tag is ranked by edit distance.
func closest(want string, tags []string, n int) []string {
	type ranked struct {
		tag  string
		v    *semver.Version
		dist [4]int64 // 0 for versions, 1 for other tags; then the distance
	}
	wv, werr := semver.NewVersion(want)
	all := make([]ranked, 0, len(tags))
	for _, t := range tags {
		r := ranked{tag: t, dist: [4]int64{1, int64(editDistance(want, t))}}
		if v, err := semver.NewVersion(t); err == nil && werr == nil {
			r.v = v
			r.dist = [4]int64{0, absDiff(v.Major(), wv.Major()), absDiff(v.Minor(), wv.Minor()), absDiff(v.Patch(), wv.Patch())}
		}
		all = append(all, r)
	}
	slices.SortFunc(all, func(a, b ranked) int {
		if c := slices.Compare(a.dist[:], b.dist[:]); c != 0 {
			return c
		}
		if a.v != nil && b.v != nil {
			return byVersionDesc(tagVersion{a.tag, a.v}, tagVersion{b.tag, b.v})
		}
		return strings.Compare(a.tag, b.tag)
	})
	out := make([]string, 0, min(n, len(all)))
	for _, r := range all[:min(n, len(all))] {
		out = append(out, r.tag)
	}
	return out
}

func absDiff(a, b uint64) int64 {
	if a > b {
		return int64(a - b)
	}
	return int64(b - a)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
