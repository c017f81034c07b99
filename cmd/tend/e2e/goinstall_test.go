package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// go install github.com/tend-dev/tend/cmd/tend@v0.1.0, as a user runs it,
// from a module proxy in a temp folder that serves a fresh commit of this
// tree as v0.1.0 (its zip made as the Go proxy makes one from the tag);
// tend's dependencies come from this machine's module cache, read as a
// proxy too (file://…/cache/download), so nothing is fetched. The
// installed tend names the version and, since go install stamps no
// commit, the tag's.
func TestVersionFromGoInstall(t *testing.T) {
	dir, head := checkoutCopy(t, "2026-01-02T15:04:05Z")
	const mod, version = "github.com/tend-dev/tend", "v0.1.0"
	proxy := t.TempDir()
	vdir := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	require.NoError(t, os.MkdirAll(vdir, 0o755))
	z, err := os.Create(filepath.Join(vdir, version+".zip"))
	require.NoError(t, err)
	require.NoError(t, modzip.CreateFromVCS(z, module.Version{Path: mod, Version: version}, dir, head, ""))
	require.NoError(t, z.Close())
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	for name, data := range map[string]string{
		"list":            version + "\n",
		version + ".info": `{"Version":"` + version + `","Time":"2026-01-02T15:04:05Z"}`,
		version + ".mod":  string(gomod),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(vdir, name), []byte(data), 0o644))
	}

	goenv := func(key string) string {
		out, err := exec.Command("go", "env", key).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	cache := filepath.Join(goenv("GOMODCACHE"), "cache", "download")
	gobin := t.TempDir()
	cmd := exec.Command("go", "install", mod+"/cmd/tend@"+version)
	cmd.Dir = t.TempDir() // outside any module, as a user runs it
	cmd.Env = append(os.Environ(),
		"GOBIN="+gobin, "GOTOOLCHAIN=local",
		// Its own module cache, so that this v0.1.0 stays out of the
		// machine's; writable, so that the test can remove it.
		"GOMODCACHE="+filepath.Join(t.TempDir(), "mod"), "GOFLAGS=-modcacherw -trimpath",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(cache)+",off",
		"GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=",
		// As make release builds: the build cache then has every
		// dependency compiled.
		"CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go install: %s", out)

	b, err := exec.Command(filepath.Join(gobin, "tend"), "version").CombinedOutput()
	require.NoError(t, err, "%s", b)
	platform := regexp.QuoteMeta(runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH)
	require.Regexp(t, `^tend v0\.1\.0 \(commit of tag v0\.1\.0, `+platform+`\)\n$`, string(b))
}
