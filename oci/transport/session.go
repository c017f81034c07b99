package transport

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrtransport "github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// sessionTTL is how long an authenticated transport to a repository is
// used again before the registry is asked again (its /v2/ ping and, for a
// token registry, a new token): the requests of one tick or one apply
// share one handshake, and a credential changed on disk is read again
// within this time (a changed credential makes a transport of its own at
// once, as credentials are part of the key).
const sessionTTL = time.Minute

// sessions caches, in this process, the authenticated transport of each
// repository: go-containerregistry otherwise pings the registry before
// every request it is given options for, so a cold model pull cost one
// extra round trip per manifest and blob.
var sessions = &sessionCache{entries: map[sessionKey]sessionEntry{}, now: time.Now}

type sessionCache struct {
	mu      sync.Mutex
	entries map[sessionKey]sessionEntry
	now     func() time.Time
}

// sessionKey is what makes a transport: the repository (its registry's
// scheme and host, and its pull scope), the credentials the keychain
// gives for it (hashed), and the transport's options.
type sessionKey struct {
	registry, scheme, scope string
	auth                    [sha256.Size]byte
	base                    uintptr // the identity of Options.Transport; 0 for the default
	timeout                 time.Duration
	maxRate                 int64
}

type sessionEntry struct {
	rt      http.RoundTripper
	expires time.Time
}

// repoTransport returns a transport that authenticates to repo's
// registry with the pull scope of repo, retrying failed requests (a
// refused connection, 5xx, 429) with backoff; it is made once per
// sessionTTL for the same repository, credentials and options. Options
// whose Transport is not a pointer cannot be told apart and get a new
// transport every call.
func (o Options) repoTransport(ctx context.Context, repo name.Repository) (http.RoundTripper, error) {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	auth, err := kc.Resolve(repo.Registry)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", repo.RegistryStr(), err)
	}
	key, cacheable := o.sessionKey(repo, auth)
	if cacheable {
		if rt := sessions.get(key); rt != nil {
			return rt, nil
		}
	}
	base := ggcrtransport.NewRetry(o.transport(), ggcrtransport.WithRetryStatusCodes(http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout))
	rt, err := ggcrtransport.NewWithContext(ctx, repo.Registry, auth, base, []string{repo.Scope(ggcrtransport.PullScope)})
	if err != nil {
		return nil, err // as go-containerregistry's own handshake returns it
	}
	if cacheable {
		sessions.put(key, rt)
	}
	return rt, nil
}

func (o Options) sessionKey(repo name.Repository, auth authn.Authenticator) (sessionKey, bool) {
	key := sessionKey{
		registry: repo.RegistryStr(), scheme: repo.Scheme(), scope: repo.Scope(ggcrtransport.PullScope),
		timeout: o.Timeout, maxRate: o.MaxRate.BytesPerSecond(),
	}
	if o.Transport != nil {
		v := reflect.ValueOf(o.Transport)
		if v.Kind() != reflect.Pointer {
			return key, false
		}
		key.base = v.Pointer()
	}
	cfg, err := authn.Authorization(context.Background(), auth)
	if err != nil {
		return key, false
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return key, false
	}
	key.auth = sha256.Sum256(b)
	return key, true
}

func (c *sessionCache) get(k sessionKey) http.RoundTripper {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.now().Before(e.expires) {
		delete(c.entries, k)
		return nil
	}
	return e.rt
}

func (c *sessionCache) put(k sessionKey, rt http.RoundTripper) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for key, e := range c.entries { // few: one per repository in use
		if !now.Before(e.expires) {
			delete(c.entries, key)
		}
	}
	c.entries[k] = sessionEntry{rt: rt, expires: now.Add(sessionTTL)}
}

// RepoOptions are the remote options for a request to repo, with its
// session transport (no handshake when one is cached). The error is the
// handshake's, as a remote call made with remoteOptions would return it.
func (o Options) RepoOptions(ctx context.Context, repo name.Repository) ([]remote.Option, error) {
	rt, err := o.repoTransport(ctx, repo)
	if err != nil {
		return nil, err
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(rt)}, nil
}

// BlobClient is an HTTP client that authenticates to repo's registry
// (see repoTransport), for a blob download of its own (a Range request
// that resumes one). Its error says why the registry is out of reach.
func (o Options) BlobClient(ctx context.Context, repo name.Repository) (*http.Client, error) {
	rt, err := o.repoTransport(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", repo.RegistryStr(), reachError(repo.RegistryStr(), err, o))
	}
	return &http.Client{Transport: rt}, nil
}

// GetManifest GETs the manifest ref names with RepoOptions.
func GetManifest(ctx context.Context, ref name.Reference, opts Options) (*remote.Descriptor, error) {
	ro, err := opts.RepoOptions(ctx, ref.Context())
	if err != nil {
		return nil, err
	}
	return remote.Get(ref, ro...)
}

// HeadManifest HEADs the manifest ref names with RepoOptions.
func HeadManifest(ctx context.Context, ref name.Reference, opts Options) (*v1.Descriptor, error) {
	ro, err := opts.RepoOptions(ctx, ref.Context())
	if err != nil {
		return nil, err
	}
	return remote.Head(ref, ro...)
}
