// Package testoci serves OCI registries for tests and pushes model
// artifacts to them the way users push them: ORAS-style artifacts whose
// layers are files named by their title annotation.
//
// The registry is go-containerregistry's pkg/registry, in-process, behind
// an optional middleware that tests use to cut, slow down or corrupt
// responses; HoldBlob stops a blob's download part way until the test
// lets it go on.
package testoci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of an ORAS artifact.
const (
	ArtifactType = "application/vnd.tend.model.v1"
	EmptyConfig  = "application/vnd.oci.empty.v1+json"
	FileType     = "application/octet-stream"
	TitleKey     = "org.opencontainers.image.title"
)

// Registry is an in-process registry on loopback.
type Registry struct {
	Host string // host:port, reached over plain HTTP
	URL  string

	// Middleware, when set, handles a request before the registry does;
	// returning true means it answered.
	mu         sync.Mutex
	middleware func(w http.ResponseWriter, r *http.Request) bool
	observe    func(r *http.Request, n int) // hears each write of a blob GET's body
	holds      map[string]*Hold             // by blob digest (see HoldBlob)
	// BlobBytes counts the body bytes of blob GETs served.
	BlobBytes atomic.Int64
	// Requests counts every request served.
	Requests atomic.Int64
}

// Start serves a registry until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	return start(t, 0)
}

// StartMetered serves a registry until the test ends whose connections
// each have a kernel send buffer of sendBuffer bytes, not one the kernel
// grows to megabytes on loopback: what the registry has written is then
// close to what the client has read, and ObserveBlobs measures the
// client's rate at the registry.
func StartMetered(t testing.TB, sendBuffer int) *Registry {
	t.Helper()
	return start(t, sendBuffer)
}

func start(t testing.TB, sendBuffer int) *Registry {
	reg := &Registry{}
	h := registry.New(registry.Logger(nopLogger()))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.Requests.Add(1)
		reg.mu.Lock()
		mw := reg.middleware
		reg.mu.Unlock()
		if mw != nil && mw(w, r) {
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
			reg.mu.Lock()
			obs := reg.observe
			reg.mu.Unlock()
			cw := &countingWriter{ResponseWriter: w, n: &reg.BlobBytes, req: r, observe: obs, hold: reg.hold(r)}
			h.ServeHTTP(cw, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	if sendBuffer > 0 {
		srv.Listener = sendBufferListener{Listener: srv.Listener, size: sendBuffer}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	reg.URL = srv.URL
	reg.Host = strings.TrimPrefix(srv.URL, "http://")
	return reg
}

// Use installs a middleware (nil removes it).
func (r *Registry) Use(mw func(w http.ResponseWriter, r *http.Request) bool) {
	r.mu.Lock()
	r.middleware = mw
	r.mu.Unlock()
}

// ObserveBlobs installs f (nil removes it): it hears the request and the
// bytes of each write of a blob GET's body as the registry writes it, on
// the request's goroutine, so a test can tell how fast the registry was
// let send.
func (r *Registry) ObserveBlobs(f func(r *http.Request, n int)) {
	r.mu.Lock()
	r.observe = f
	r.mu.Unlock()
}

// Ref returns host/repo:tag on this registry.
func (r *Registry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

// PushFiles pushes an ORAS-style artifact: one layer per file, named by
// its title annotation, an empty config, and artifactType. It returns the
// manifest digest.
func (r *Registry) PushFiles(t testing.TB, repoTag string, files map[string][]byte) string {
	t.Helper()
	d, err := PushFiles(r.Host, repoTag, files)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Layer is one layer to push.
type Layer struct {
	Data        []byte
	MediaType   string
	Annotations map[string]string
}

// Push uploads the layers and config and puts an OCI image manifest with
// them under repoTag (host excluded). It returns the manifest digest.
func (r *Registry) Push(t testing.TB, repoTag, configType string, config []byte, layers []Layer) string {
	t.Helper()
	d, err := Push(r.Host, repoTag, configType, config, layers)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// PushFiles pushes an ORAS-style artifact to the registry at host (plain
// HTTP), as PushFiles does.
func PushFiles(host, repoTag string, files map[string][]byte) (string, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var layers []Layer
	for _, n := range names {
		layers = append(layers, Layer{Data: files[n], MediaType: FileType, Annotations: map[string]string{TitleKey: n}})
	}
	return Push(host, repoTag, EmptyConfig, []byte("{}"), layers)
}

// Push uploads the layers and config to the registry at host (plain HTTP)
// and puts an OCI image manifest with them under repoTag. It returns the
// manifest digest.
func Push(host, repoTag, configType string, config []byte, layers []Layer) (string, error) {
	return PushArtifact(host, repoTag, ArtifactType, configType, config, layers)
}

// PushArtifact is Push with the manifest's artifactType ("" for none), as
// the tool that makes a format sets it.
func PushArtifact(host, repoTag, artifactType, configType string, config []byte, layers []Layer) (string, error) {
	ref, err := name.ParseReference(host+"/"+repoTag, name.Insecure)
	if err != nil {
		return "", err
	}
	repo := ref.Context()
	m := manifest{SchemaVersion: 2, MediaType: string(types.OCIManifestSchema1), ArtifactType: artifactType}
	upload := func(data []byte, mt string) (descriptor, error) {
		l := static.NewLayer(data, types.MediaType(mt))
		if err := remote.WriteLayer(repo, l); err != nil {
			return descriptor{}, fmt.Errorf("push blob: %w", err)
		}
		return descriptor{MediaType: mt, Digest: Digest(data), Size: int64(len(data))}, nil
	}
	if m.Config, err = upload(config, configType); err != nil {
		return "", err
	}
	for _, l := range layers {
		d, err := upload(l.Data, l.MediaType)
		if err != nil {
			return "", err
		}
		d.Annotations = l.Annotations
		m.Layers = append(m.Layers, d)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := remote.Put(ref, rawManifest{raw: raw, mt: types.OCIManifestSchema1}); err != nil {
		return "", fmt.Errorf("push manifest %s: %w", ref, err)
	}
	return Digest(raw), nil
}

// Tag points tag at the manifest repo:from already has.
func (r *Registry) Tag(t testing.TB, repoFrom, tag string) {
	t.Helper()
	ref, err := name.ParseReference(r.Ref(repoFrom), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(ref.Context().Tag(tag), desc); err != nil {
		t.Fatal(err)
	}
}

// Digest returns "sha256:<hex>" of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	ArtifactType  string       `json:"artifactType,omitempty"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }
func (m rawManifest) Digest() (v1.Hash, error)            { return v1.NewHash(Digest(m.raw)) }
func (m rawManifest) Size() (int64, error)                { return int64(len(m.raw)), nil }

type countingWriter struct {
	http.ResponseWriter
	n       *atomic.Int64
	req     *http.Request
	observe func(r *http.Request, n int)
	hold    *Hold // waited for once sent reaches its after; nil: none
	sent    int64 // body bytes written
}

// Write writes p 32 KiB at a time (the registry writes a blob it holds in
// memory in one call), so an observer hears the body as it goes, and a
// hold stops it where it says.
func (c *countingWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		size := int64(min(len(p), 32<<10))
		if h := c.hold; h != nil && c.sent >= h.after {
			c.hold = nil
			if err := h.wait(c.req.Context(), c.ResponseWriter); err != nil {
				return written, err
			}
		} else if h != nil {
			size = min(size, h.after-c.sent)
		}
		n, err := c.ResponseWriter.Write(p[:size])
		written += n
		c.sent += int64(n)
		p = p[n:]
		c.n.Add(int64(n))
		if c.observe != nil && n > 0 {
			c.observe(c.req, n)
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// sendBufferListener sets the kernel send buffer of each connection it
// accepts.
type sendBufferListener struct {
	net.Listener
	size int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if serr := tc.SetWriteBuffer(l.size); serr != nil {
			_ = c.Close()
			return nil, serr
		}
	}
	return c, err
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }
