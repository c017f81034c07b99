package transport

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// MaxSkipped bounds the tags ResolveSkipping passes over, one HEAD each.
const MaxSkipped = 64

// ResolveSkipping pins the repository ref to the highest tag in
// semverRange that skip does not refuse: it walks the matching tags
// highest first (the tag list within its bounds), with one HEAD each,
// and returns the first one not skipped and those passed over, highest
// first. skip is asked of each resolved tag in turn; an error from it
// stops the walk and is returned. When every matching tag is skipped,
// the resolution is the zero Resolved and skipped lists them all; past
// MaxSkipped it is an error.
func ResolveSkipping(ctx context.Context, ref, semverRange string, opts Options, skip func(context.Context, Resolved) (bool, error)) (Resolved, []Resolved, error) {
	repo, err := name.NewRepository(ref, opts.NameOptions(ref)...)
	if err != nil {
		return Resolved{Ref: ref}, nil, fmt.Errorf("model ref %q: %w", ref, err)
	}
	tags, err := candidates(ctx, repo, semverRange, opts)
	if err != nil {
		return Resolved{Ref: ref}, nil, err
	}
	var skipped []Resolved
	for _, tag := range tags {
		if len(skipped) >= MaxSkipped {
			return Resolved{Ref: ref}, skipped, fmt.Errorf("%s: the %d highest tags in %q are all refused; push a new version", ref, MaxSkipped, semverRange)
		}
		r, err := Resolve(ctx, repo.Tag(tag).String(), "", opts)
		if err != nil {
			return Resolved{Ref: ref}, skipped, err
		}
		r.Ref = ref
		out, err := skip(ctx, r)
		if err != nil {
			return Resolved{Ref: ref}, skipped, err
		}
		if !out {
			return r, skipped, nil
		}
		skipped = append(skipped, r)
	}
	return Resolved{}, skipped, nil
}
