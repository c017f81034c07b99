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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is an image pushed to a registry.
type Image struct {
	Tag    string // HOST/REPO:TAG
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

// PushProgram builds the Go main package in dir as a static binary (once
// per test binary) and pushes it FROM scratch to registry (host:port,
// plain HTTP) as repo:latest, as BuildProgram and PushImage do. With
// -short it skips the test: an image is for an engine, which -short never
// starts, and the build takes seconds.
func PushProgram(t testing.TB, registry, repo, dir string) Image {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds a program's image for a container engine; make test runs it, -short skips it")
	}
	img, err := PushImage(registry, repo, "latest", build(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// BuildProgram compiles the Go main package in dir as a static binary
// (CGO_ENABLED=0, with the go command in PATH) at out.
func BuildProgram(dir, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", dir, err, b)
	}
	return nil
}

// PushImage puts the program at bin FROM scratch in an image as /prog,
// its entrypoint, for linux on this machine's architecture, and pushes the
// image to registry (host:port, plain HTTP) as repo:tag.
func PushImage(registry, repo, tag, bin string) (Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "prog", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	if _, err := tw.Write(data); err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	if err := tw.Close(); err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer.Bytes())), nil
	})
	if err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/prog"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	ref, err := name.NewTag(registry+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	if err := remote.Write(ref, img); err != nil {
		return Image{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Image{}, fmt.Errorf("image of %s: %w", bin, err)
	}
	return Image{Tag: ref.String(), Ref: registry + "/" + repo + "@" + d.String(), Digest: d.String()}, nil
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
	if err := BuildProgram(dir, out); err != nil {
		t.Fatal(err)
	}
	binaries.path[dir] = out
	return out
}

// MoveTag pushes the image tag names (HOST/REPO:TAG, plain HTTP) again
// with env added to its environment and cmd as its default arguments,
// and returns the new image's digest: a rebuilt image under the same
// tag, as a CI pushes one.
func MoveTag(t testing.TB, tag, env string, cmd ...string) string {
	t.Helper()
	return MoveTagConfig(t, tag, func(c *v1.Config) {
		c.Env = append(c.Env, env)
		c.Cmd = cmd
	})
}

// MoveTagConfig pushes the image tag names again with its config as edit
// leaves it, and returns the new image's digest.
func MoveTagConfig(t testing.TB, tag string, edit func(*v1.Config)) string {
	t.Helper()
	ref, err := name.ParseReference(tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	edit(&cf.Config)
	moved, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, moved); err != nil {
		t.Fatal(err)
	}
	d, err := moved.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
