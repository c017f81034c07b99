package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
)

// make release's script (.ci/release), run on a fresh commit of this
// tree for linux/amd64 into a temp folder: the checksums match the
// archive and the SBOM, their signature verifies with cosign verify-blob
// against the key pair the script made (and a changed checksums file does
// not), the SBOM names the module, and the binary in the archive prints
// the version and commit it was stamped with.
func TestRelease(t *testing.T) {
	cosign := testcosign.New(t)
	if _, err := exec.LookPath("zip"); err != nil {
		t.Skip("zip is not installed (the release's Windows archive): apt-get install zip")
	}
	dir, head := checkoutCopy(t, "2026-01-02T15:04:05Z")
	out := t.TempDir()
	const version = "v0.9.1-rc.1"
	cmd := exec.Command("bash", ".ci/release", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "VERSION="+version, "COMMIT="+head, "PLATFORMS=linux/amd64",
		"COSIGN="+cosign.Bin, "COSIGN_KEY=")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "release: %s", b)

	const name = "tend_0.9.1-rc.1_linux_amd64"
	sums := filepath.Join(out, "tend_0.9.1-rc.1_checksums.txt")
	f, err := os.Open(sums)
	require.NoError(t, err)
	defer f.Close()
	var listed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "checksums line %q", sc.Text())
		got, err := os.ReadFile(filepath.Join(out, file))
		require.NoError(t, err)
		h := sha256.Sum256(got)
		require.Equal(t, sum, hex.EncodeToString(h[:]), "sha256 of %s", file)
		listed = append(listed, file)
	}
	require.NoError(t, sc.Err())
	require.Equal(t, []string{name + ".tar.gz", name + ".cdx.json"}, listed)

	pub, sig := filepath.Join(out, "cosign.pub"), sums+".sig"
	cosign.Run("verify-blob", "--key", pub, "--signature", sig, "--insecure-ignore-tlog=true", sums)
	tampered := filepath.Join(t.TempDir(), "checksums.txt")
	orig, err := os.ReadFile(sums)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tampered, append(orig, "0000  extra.tar.gz\n"...), 0o644))
	_, err = cosign.Try("verify-blob", "--key", pub, "--signature", sig, "--insecure-ignore-tlog=true", tampered)
	require.Error(t, err, "a changed checksums file must not verify")

	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name string `json:"name"`
				Purl string `json:"purl"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	b, err = os.ReadFile(filepath.Join(out, name+".cdx.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &bom))
	require.Equal(t, "CycloneDX", bom.BOMFormat)
	require.Equal(t, "github.com/tend-dev/tend", bom.Metadata.Component.Name)
	require.Contains(t, bom.Metadata.Component.Purl, "pkg:golang/github.com/tend-dev/tend@")
	var deps []string
	for _, c := range bom.Components {
		deps = append(deps, c.Name)
	}
	require.Contains(t, deps, "github.com/spf13/cobra")

	bin := filepath.Join(t.TempDir(), "tend")
	untar(t, filepath.Join(out, name+".tar.gz"), map[string]string{"tend": bin, "README.md": filepath.Join(t.TempDir(), "README.md")})
	b, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Regexp(t, `^tend `+regexp.QuoteMeta(version)+` \(commit `+head+`, go\S+ linux/amd64\)\n$`, string(b))
}

// untar writes each file of the .tar.gz at path named in want to the
// path want gives it, and fails when the archive holds any other entry
// or misses one.
func untar(t *testing.T, path string, want map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		dst, ok := want[h.Name]
		require.True(t, ok, "%s holds %s", path, h.Name)
		w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
		require.NoError(t, err)
		_, err = io.Copy(w, tr)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		seen[h.Name] = true
	}
	require.Len(t, seen, len(want), "%s: entries", path)
}

// .ci/release refuses to start, saying what is missing and how to get it,
// without VERSION, without COMMIT, or without cosign.
func TestReleaseRefuses(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no version", []string{"VERSION=", "COMMIT=abc"}, "VERSION is not set: the version to stamp"},
		{"no commit", []string{"VERSION=v1.0.0", "COMMIT="}, "COMMIT is not set: the commit to stamp"},
		{"no cosign", []string{"VERSION=v1.0.0", "COMMIT=abc", "COSIGN=/nonexistent/cosign"},
			"release: no cosign at /nonexistent/cosign (COSIGN, else PATH, else "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command("bash", filepath.Join(root, ".ci", "release"), out)
			cmd.Env = append(os.Environ(), tc.env...)
			b, err := cmd.CombinedOutput()
			require.Error(t, err)
			require.Contains(t, string(b), tc.want)
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing is written")
		})
	}
}
