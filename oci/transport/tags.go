package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Bounds of one listing of a repository's tags (a semver policy lists them
// every tick): a registry that pages forever, or sends one endless page,
// fails the listing rather than the agent's memory.
const (
	MaxTagPages     = 100
	MaxTags         = 100_000
	MaxTagPageBytes = 4 << 20
)

// errTagListTooLarge is the cause of a listing cut at one of its bounds.
var errTagListTooLarge = errors.New("tag list too large")

// listTags lists repo's tags, page by page, within MaxTagPages,
// MaxTags and MaxTagPageBytes a page.
func listTags(ctx context.Context, repo name.Repository, opts Options) ([]string, error) {
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	p, err := remote.NewPuller(remote.WithContext(ctx), remote.WithAuthFromKeychain(kc),
		remote.WithTransport(capBody{base: opts.transport(), max: MaxTagPageBytes}))
	if err != nil {
		return nil, err
	}
	l, err := p.Lister(ctx, repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	for pages := 1; l.HasNext(); pages++ {
		if pages > MaxTagPages {
			return nil, fmt.Errorf("%w: the tag list of %s goes on past %d pages (%d tags so far); the registry may be paging in a loop", errTagListTooLarge, repo, MaxTagPages, len(tags))
		}
		page, err := l.Next(ctx)
		if err != nil {
			return nil, err
		}
		if tags = append(tags, page.Tags...); len(tags) > MaxTags {
			return nil, fmt.Errorf("%w: the tag list of %s exceeds %d tags; pin the model by tag or digest instead of a policy", errTagListTooLarge, repo, MaxTags)
		}
	}
	return tags, nil
}

// capBody fails the read of a response body past max bytes.
type capBody struct {
	base http.RoundTripper
	max  int64
}

func (t capBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.max, url: req.URL.Redacted()}
	return resp, nil
}

type cappedBody struct {
	io.ReadCloser
	left int64
	url  string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the cap from a longer one.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			// go-containerregistry's lister leaves a body it failed to
			// decode open: close it here, or the connection stays up
			// while the server writes on.
			_ = b.ReadCloser.Close()
			return 0, fmt.Errorf("%w: a page of %s is over %d bytes", errTagListTooLarge, b.url, MaxTagPageBytes)
		}
		return b.ReadCloser.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
