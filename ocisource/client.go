package ocisource

import (
	"context"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tend-dev/tend/oci"
)

// Client reaches the registry of a fleet artifact. It keeps what it
// learnt about a registry (its ping, a bearer token) from one fetch to the
// next, so a poll is one manifest HEAD; after any failure it starts over
// at the next fetch, so a rotated credential is read again.
type Client struct {
	opts oci.Options

	mu     sync.Mutex
	puller *remote.Puller
}

// NewClient returns a client that reaches registries with opts, following
// at most MaxRedirects redirects per request.
func NewClient(opts oci.Options) *Client { return &Client{opts: limitRedirects(opts)} }

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

func (c *Client) layer(ctx context.Context, ref name.Digest) (v1.Layer, error) {
	p, err := c.get()
	if err != nil {
		return nil, err
	}
	l, err := p.Layer(ctx, ref)
	return l, c.done(err)
}
