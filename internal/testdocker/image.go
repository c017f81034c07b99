package testdocker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is a test image pushed to a registry.
type Image struct {
	Tag    string // HOST/REPO:latest
	Ref    string // HOST/REPO@sha256:…, what a container runs
	Digest string // sha256:… of the manifest
}

// SvcDir is the folder of svc, the test program of the images tests run:
// it prints "svc up pid N" on stdout (then -say's text) and "svc stderr" on
// stderr, and runs until SIGTERM (exit 0), or exits with -exit N; -alloc N
// allocates and touches N MiB first.
func SvcDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "svc")
}

// binaries caches the static builds of Go main packages, by folder.
var binaries struct {
	mu   sync.Mutex
	dir  string
	path map[string]string
}

// PushProgram builds the Go main package in dir as a static binary
// (CGO_ENABLED=0, once per test binary), puts it FROM scratch in an image
// as /prog, its entrypoint, and pushes the image to registry (host:port,
// plain HTTP) as repo:latest.
func PushProgram(t testing.TB, registry, repo, dir string) Image {
	t.Helper()
	bin := build(t, dir)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "prog", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer.Bytes())), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/prog"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(registry+"/"+repo+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("push %s: %v", tag, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return Image{Tag: tag.String(), Ref: registry + "/" + repo + "@" + d.String(), Digest: d.String()}
}

// build compiles the main package in dir statically, once per test binary.
func build(t testing.TB, dir string) string {
	t.Helper()
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if p, ok := binaries.path[dir]; ok {
		return p
	}
	if binaries.dir == "" {
		d, err := os.MkdirTemp("", "testdocker-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binaries.dir, binaries.path = d, map[string]string{}
		addCleanup(func() { os.RemoveAll(d) })
	}
	out := filepath.Join(binaries.dir, fmt.Sprintf("prog%d", len(binaries.path)))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, b)
	}
	binaries.path[dir] = out
	return out
}
