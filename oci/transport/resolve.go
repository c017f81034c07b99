package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrtransport "github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/tend-dev/tend/manifest"
)

// ErrNotFound means the repository, tag or digest does not exist, or no tag
// matches the policy. Retrying will not help until someone pushes it.
var ErrNotFound = errors.New("not found in registry")

// ErrUnauthorized means the registry refused the credentials tend sent, or
// wants some and tend has none.
var ErrUnauthorized = errors.New("registry refused the credentials")

// ErrDigestMismatch means the bytes a registry sent do not hash to the
// digest they were asked for; they are thrown away.
var ErrDigestMismatch = errors.New("digest mismatch")

// Options say how to reach registries.
type Options struct {
	// Insecure lists registries (host[:port]) reached over plain HTTP.
	Insecure []string
	// Keychain finds credentials; nil means the default docker keychain.
	Keychain authn.Keychain
	// Transport is the HTTP transport; nil means the default.
	Transport http.RoundTripper
	// Timeout is how long the registry may go silent (see ErrStalled);
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// Progress, when set, hears the bytes of each blob the store's Fetch
	// downloads.
	Progress Progress
	// MaxRate, unless zero, caps the total rate at which the response
	// bodies of every request made with options of this MaxRate are
	// read, in this process: blobs, manifests, tag lists, tokens. One
	// token bucket per rate serves every download (see sharedLimiter).
	MaxRate manifest.Rate
}

// Resolved is a model ref pinned to the digest of its manifest.
type Resolved struct {
	Ref       string // as declared
	Tag       string // the tag chosen ("" for a digest ref)
	Digest    string // sha256:…
	MediaType string // of the manifest or index
	Size      int64  // of the manifest or index
}

// String is the form plans print: "ref → sha256:…".
func (r Resolved) String() string { return r.Ref + " → " + r.Digest }

// Resolve pins ref to a digest with one HEAD request (none of the layers
// is read). With a semver range, ref names a repository and the highest
// tag matching the range is chosen from the repository's tag list.
func Resolve(ctx context.Context, ref, semverRange string, opts Options) (Resolved, error) {
	res := Resolved{Ref: ref}
	nameOpts := opts.NameOptions(ref)
	if semverRange != "" {
		repo, err := name.NewRepository(ref, nameOpts...)
		if err != nil {
			return res, fmt.Errorf("model ref %q: %w", ref, err)
		}
		tag, err := highest(ctx, repo, semverRange, opts)
		if err != nil {
			return res, err
		}
		res.Tag = tag
		ref = repo.Tag(tag).String()
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return res, fmt.Errorf("model ref %q: %w", ref, err)
	}
	if t, ok := r.(name.Tag); ok && res.Tag == "" {
		res.Tag = t.TagStr()
	}
	desc, err := HeadManifest(ctx, r, opts)
	if err != nil {
		return res, headError(ctx, r, err, opts)
	}
	res.Digest, res.MediaType, res.Size = desc.Digest.String(), string(desc.MediaType), desc.Size
	return res, nil
}

// highest lists repo's tags and returns the highest one in semverRange.
func highest(ctx context.Context, repo name.Repository, semverRange string, opts Options) (string, error) {
	tags, err := candidates(ctx, repo, semverRange, opts)
	if err != nil {
		return "", err
	}
	return tags[0], nil
}

// candidates lists repo's tags (within the tag-list bounds) and returns
// those in semverRange, highest first; none is ErrNotFound.
func candidates(ctx context.Context, repo name.Repository, semverRange string, opts Options) ([]string, error) {
	c, err := semver.NewConstraint(semverRange)
	if err != nil {
		return nil, fmt.Errorf("policy.semver %q: %w", semverRange, err)
	}
	tags, err := listTags(ctx, repo, opts)
	if err != nil {
		return nil, Classify(repo.String(), err, opts)
	}
	type candidate struct {
		tag string
		v   *semver.Version
	}
	var matches []candidate
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		matches = append(matches, candidate{t, v})
	}
	if len(matches) == 0 {
		return nil, noMatch(repo, semverRange, tags)
	}
	sort.Slice(matches, func(i, j int) bool {
		if !matches[i].v.Equal(matches[j].v) {
			return matches[i].v.GreaterThan(matches[j].v)
		}
		// The same version under several tags (v8, v8.0.0): the most
		// specific tag, then a stable order.
		if len(matches[i].tag) != len(matches[j].tag) {
			return len(matches[i].tag) > len(matches[j].tag)
		}
		return matches[i].tag < matches[j].tag
	})
	out := make([]string, len(matches))
	for i, m := range matches {
		out[i] = m.tag
	}
	return out, nil
}

// FullVersion reports whether tag spells a version in full, as a semver
// policy is best served: MAJOR.MINOR.PATCH, with or without a leading v
// and with any prerelease or build metadata (1.3.0, v1.3.0, 1.3.0-rc.1).
// A policy also matches tags that spell less (v3 as 3.0.0, 1.2 as
// 1.2.0), which is seldom what was meant: such a tag is often moved to
// each new release of its line.
func FullVersion(tag string) bool {
	_, err := semver.StrictNewVersion(strings.TrimPrefix(tag, "v"))
	return err == nil
}

// NameOptions are the options to parse ref with: plain HTTP for a
// registry listed as insecure.
func (o Options) NameOptions(ref string) []name.Option {
	for _, h := range o.Insecure {
		if strings.HasPrefix(ref, h+"/") {
			return []name.Option{name.Insecure}
		}
	}
	return nil
}

func (o Options) remoteOptions(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(o.transport())}
}

// Classify wraps a registry error so callers can tell "not there" from
// trouble reaching the registry (see reachError).
func Classify(ref string, err error, opts Options) error {
	var te *ggcrtransport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, ggcrtransport.ManifestUnknownErrorCode, ggcrtransport.NameUnknownErrorCode)) {
		return fmt.Errorf("%w: %s: %v", ErrNotFound, ref, err)
	}
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w for %s (HTTP %d): check registries.dockerConfig or run docker login on the device", ErrUnauthorized, ref, te.StatusCode)
	}
	return fmt.Errorf("resolve %s: %w", ref, reachError(registryOf(ref), err, opts))
}

// headError explains a failed HEAD of ref: a tag or digest the registry
// does not have is said so in tend's words (HEAD answers carry no body to
// quote), with the closest tags for a tag.
func headError(ctx context.Context, ref name.Reference, err error, opts Options) error {
	err = Classify(ref.String(), err, opts)
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	switch r := ref.(type) {
	case name.Tag:
		return tagNotFound(ctx, r, opts)
	case name.Digest:
		return notFoundf("manifest %s not found in %s", r.DigestStr(), r.Context())
	}
	return err
}

func hasCode(te *ggcrtransport.Error, codes ...ggcrtransport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// RemoteOptions are the go-containerregistry options that reach a
// registry as tend does: its credentials, plain HTTP where insecure (see
// NameOptions), and the stall timeout.
func (o Options) RemoteOptions(ctx context.Context) []remote.Option { return o.remoteOptions(ctx) }

// ExplainHead turns a failed HEAD or GET of ref's manifest into tend's
// errors: ErrNotFound naming the tag and the closest tags the repository
// has (one more request to list them), ErrUnauthorized with what to check,
// or the error with the ref.
func ExplainHead(ctx context.Context, ref name.Reference, err error, opts Options) error {
	return headError(ctx, ref, err, opts)
}
