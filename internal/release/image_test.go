package release_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/release"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testlayout"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

func TestMain(m *testing.M) { os.Exit(testdocker.Main(m)) }

var created = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// binaries writes a stand-in binary per platform (the image does not run
// them here) and returns them with their contents.
func binaries(t *testing.T, platforms ...string) ([]release.Binary, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	var bins []release.Binary
	data := map[string][]byte{}
	for i, p := range platforms {
		path := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		b := bytes.Repeat([]byte(p+"\n"), 1000+i)
		require.NoError(t, os.WriteFile(path, b, 0o755))
		bin, err := release.ParseBinary(p + "=" + path)
		require.NoError(t, err)
		bins = append(bins, bin)
		data[p] = b
	}
	return bins, data
}

// layerFiles returns the files of img's single layer, name → content ("" for
// a folder), and their modes.
func layerFiles(t *testing.T, img v1.Image) (map[string]string, map[string]int64) {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	mt, err := layers[0].MediaType()
	require.NoError(t, err)
	require.Equal(t, types.OCILayer, mt)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	files, modes := map[string]string{}, map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name], modes[h.Name] = string(b), h.Mode
		require.True(t, h.ModTime.Equal(created), "%s dated %s", h.Name, h.ModTime)
		require.Zero(t, h.Uid, h.Name)
	}
	return files, modes
}

// The image of three linux platforms: an OCI index naming each platform
// (arm with its variant), each image FROM scratch with the binary at
// /usr/local/bin/tend as its entrypoint and an empty /tmp, the OCI
// annotations on the index and each image (labels in the config), and
// the same archive bytes and digest when built again.
func TestImage(t *testing.T) {
	platforms := []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}
	bins, data := binaries(t, platforms...)
	im := release.Image{Version: "v1.2.3", Revision: "0123456789abcdef", Source: "https://github.com/tend-dev/tend", Created: created, Binaries: bins}
	out := filepath.Join(t.TempDir(), "tend_1.2.3_image.tar")
	digest, err := im.WriteArchive(out)
	require.NoError(t, err)

	idx, ref, _ := testlayout.Read(t, out)
	require.Equal(t, "v1.2.3", ref)
	got, err := idx.Digest()
	require.NoError(t, err)
	require.Equal(t, digest, got)
	want := map[string]string{
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "0123456789abcdef",
		"org.opencontainers.image.source":   "https://github.com/tend-dev/tend",
		"org.opencontainers.image.created":  "2026-01-02T15:04:05Z",
		"org.opencontainers.image.title":    "tend",
	}
	man, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, want, man.Annotations)
	require.Len(t, man.Manifests, 3)
	for i, desc := range man.Manifests {
		require.Equal(t, platforms[i], desc.Platform.String())
		require.Equal(t, types.OCIManifestSchema1, desc.MediaType)
		img, err := idx.Image(desc.Digest)
		require.NoError(t, err)
		m, err := img.Manifest()
		require.NoError(t, err)
		require.Equal(t, want, m.Annotations)
		require.Equal(t, types.OCIConfigJSON, m.Config.MediaType)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, []string{"/usr/local/bin/tend"}, cf.Config.Entrypoint)
		require.Empty(t, cf.Config.Cmd)
		require.Equal(t, want, cf.Config.Labels)
		require.True(t, cf.Created.Equal(created))
		require.Equal(t, desc.Platform.Architecture, cf.Architecture)
		require.Equal(t, desc.Platform.Variant, cf.Variant)
		files, modes := layerFiles(t, img)
		require.Equal(t, map[string]string{"tmp/": "", "usr/": "", "usr/local/": "", "usr/local/bin/": "",
			"usr/local/bin/tend": string(data[platforms[i]])}, files)
		require.Equal(t, int64(0o1777), modes["tmp/"])
		require.Equal(t, int64(0o755), modes["usr/local/bin/tend"])
	}

	again := filepath.Join(t.TempDir(), "again.tar")
	d2, err := im.WriteArchive(again)
	require.NoError(t, err)
	require.Equal(t, digest, d2)
	a, err := os.ReadFile(out)
	require.NoError(t, err)
	b, err := os.ReadFile(again)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "the archive is the same when built again")
}

// tend-hub's image holds tend-hub, at /usr/local/bin/tend-hub, its
// entrypoint, and is titled so.
func TestImageOfAnotherProgram(t *testing.T) {
	bins, data := binaries(t, "linux/amd64")
	im := release.Image{Version: "v1.2.3", Revision: "0123456789abcdef", Created: created, Binaries: bins, Program: "tend-hub"}
	out := filepath.Join(t.TempDir(), "tend-hub_1.2.3_image.tar")
	_, err := im.WriteArchive(out)
	require.NoError(t, err)
	idx, _, _ := testlayout.Read(t, out)
	man, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, "tend-hub", man.Annotations["org.opencontainers.image.title"])
	img, err := idx.Image(man.Manifests[0].Digest)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/tend-hub"}, cf.Config.Entrypoint)
	files, _ := layerFiles(t, img)
	require.Equal(t, string(data["linux/amd64"]), files["usr/local/bin/tend-hub"])
	require.NotContains(t, files, "usr/local/bin/tend")
}

// Bad input is refused with what is wrong, and no archive is written.
func TestImageRefuses(t *testing.T) {
	bins, _ := binaries(t, "linux/amd64")
	good := release.Image{Version: "v1.0.0", Revision: "abc", Created: created, Binaries: bins}
	for _, tc := range []struct {
		name string
		edit func(*release.Image)
		want string
	}{
		{"no version", func(im *release.Image) { im.Version = "" }, "image: no version"},
		{"no revision", func(im *release.Image) { im.Revision = "" }, "image: no revision"},
		{"no time", func(im *release.Image) { im.Created = time.Time{} }, "image: no creation time (SOURCE_DATE_EPOCH)"},
		{"no binaries", func(im *release.Image) { im.Binaries = nil }, "image: no binaries"},
		{"darwin", func(im *release.Image) {
			im.Binaries = append(im.Binaries, release.Binary{Platform: v1.Platform{OS: "darwin", Architecture: "arm64"}, Path: bins[0].Path})
		}, "image: platform darwin/arm64: the image is for linux only"},
		{"twice", func(im *release.Image) { im.Binaries = append(im.Binaries, bins[0]) }, "image: platform linux/amd64 is given twice"},
		{"missing binary", func(im *release.Image) {
			im.Binaries = []release.Binary{{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Path: "/nonexistent/tend"}}
		}, "image for linux/arm64: open /nonexistent/tend: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := good
			im.Binaries = append([]release.Binary(nil), good.Binaries...)
			tc.edit(&im)
			dir := t.TempDir()
			_, err := im.WriteArchive(filepath.Join(dir, "image.tar"))
			require.ErrorContains(t, err, tc.want)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}
	for _, arg := range []string{"linux/amd64", "=bin", "linux/amd64/v1/x=bin"} {
		_, err := release.ParseBinary(arg)
		require.ErrorContains(t, err, "binary "+`"`+arg+`"`)
	}
}

// The image of a real tend, pushed to a registry and pulled by digest
// into a private Docker Engine, runs tend: version prints what the
// binary was stamped with, and validate checks a fleet folder mounted
// into the container, as a CI job does.
func TestImageRunsInDocker(t *testing.T) {
	host := testdocker.Host(t)
	reg := testoci.Start(t)
	// imagetool, as .ci/release runs it: built without the race detector,
	// which makes compressing the 40 MB binary several times slower.
	dir := t.TempDir()
	bin, tool := filepath.Join(dir, "tend"), filepath.Join(dir, "imagetool")
	for _, args := range [][]string{
		{"build", "-trimpath", "-ldflags", "-s -w -X main.version=v1.2.3 -X main.commit=0123456789abcdef", "-o", bin, "./cmd/tend"},
		{"build", "-o", tool, "./internal/release/imagetool"},
	} {
		build := exec.Command("go", args...)
		build.Dir = "../.."
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		b, err := build.CombinedOutput()
		require.NoError(t, err, "go %v: %s", args, b)
	}
	archive := filepath.Join(dir, "image.tar")
	b, err := exec.Command(tool, "-out", archive, "-version", "v1.2.3", "-revision", "0123456789abcdef",
		"-created", strconv.FormatInt(created.Unix(), 10), "linux/"+runtime.GOARCH+"="+bin).Output()
	require.NoError(t, err)
	digest, err := v1.NewHash(strings.TrimSpace(string(b)))
	require.NoError(t, err, "imagetool prints the index digest")
	idx, _, _ := testlayout.Read(t, archive)
	got, err := idx.Digest()
	require.NoError(t, err)
	require.Equal(t, digest, got)
	tag, err := name.NewTag(reg.Host+"/tend:v1.2.3", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(tag, idx))
	ref := reg.Host + "/tend@" + digest.String()

	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	defer cli.Close()
	ctx := context.Background()
	pull, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	require.NoError(t, err)
	require.NoError(t, pull.Wait(ctx))
	require.NoError(t, pull.Close())

	fleet := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(fleet, "device.yaml"), []byte(
		"apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/config.yaml, content: \"x\\n\"}\n"), 0o644))
	run := func(args ...string) (string, int64) {
		t.Helper()
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: ref, Cmd: args},
			HostConfig: &container.HostConfig{NetworkMode: "none", Binds: []string{fleet + ":/fleet:ro"}},
		})
		require.NoError(t, err)
		defer cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, client.ContainerRemoveOptions{Force: true})
		wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
		_, err = cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
		require.NoError(t, err)
		var code int64
		select {
		case w := <-wait.Result:
			code = w.StatusCode
		case err := <-wait.Error:
			require.NoError(t, err)
		}
		logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
		require.NoError(t, err)
		defer logs.Close()
		var out bytes.Buffer
		_, err = stdcopy.StdCopy(&out, &out, logs)
		require.NoError(t, err)
		return out.String(), code
	}
	out, code := run("version")
	require.Zero(t, code, out)
	require.Regexp(t, `^tend v1\.2\.3 \(commit 0123456789abcdef, go\S+ linux/`+runtime.GOARCH+`\)\n$`, out)
	out, code = run("validate", "/fleet/device.yaml")
	require.Zero(t, code, out)
	require.Contains(t, out, "valid")
}
