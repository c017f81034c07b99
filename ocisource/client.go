package ocisource

import (
	"context"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tend-dev/tend/oci/transport"
)

// Client reaches the registry of a fleet artifact. It keeps what it
// learnt about a registry (its ping, a bearer token) from one fetch to the
// next, so a poll is one manifest HEAD; after any failure it starts over
// at the next fetch, so a rotated credential is read again.
type Client struct {
	opts transport.Options

	mu     sync.Mutex
	puller *remote.Puller
	// refused holds the artifacts refused for what they are (not a fleet
	// artifact, too large, an unsafe layer), by repository and manifest
	// digest, with the error: what a digest names never changes, so such
	// an artifact is not downloaded again while the tag names it, and the
	// same error is reported. At most maxRefused are remembered.
	refused map[string]error
}

// maxRefused bounds Client.refused; when full it starts over.
const maxRefused = 64

// NewClient returns a client that reaches registries with opts, following
// at most MaxRedirects redirects per request.
func NewClient(opts transport.Options) *Client { return &Client{opts: limitRedirects(opts)} }

func (c *Client) get() (*remote.Puller, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.puller == nil {
		p, err := remote.NewPuller(c.opts.RemoteOptions(context.Background())...)
		if err != nil {
			return nil, err
		}
		c.puller = p
	}
	return c.puller, nil
}

// reset forgets the registry sessions after a failure.
func (c *Client) reset() {
	c.mu.Lock()
	c.puller = nil
	c.mu.Unlock()
}

// done resets the client when err is not nil, and returns err.
func (c *Client) done(err error) error {
	if err != nil {
		c.reset()
	}
	return err
}

func (c *Client) head(ctx context.Context, ref name.Reference) (*v1.Descriptor, error) {
	p, err := c.get()
	if err != nil {
		return nil, err
	}
	d, err := p.Head(ctx, ref)
	return d, c.done(err)
}

func (c *Client) manifest(ctx context.Context, ref name.Reference) (*remote.Descriptor, error) {
	p, err := c.get()
	if err != nil {
		return nil, err
	}
	d, err := p.Get(ctx, ref)
	return d, c.done(err)
}

// refusal returns the error key (REPOSITORY@DIGEST) was refused with,
// nil when it was not.
func (c *Client) refusal(key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused[key]
}

// refuse remembers that key was refused with err.
func (c *Client) refuse(key string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused == nil || len(c.refused) >= maxRefused {
		c.refused = map[string]error{}
	}
	c.refused[key] = err
}
