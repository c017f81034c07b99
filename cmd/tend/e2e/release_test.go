package e2e

import (
	"bufio"
	"bytes"
	"context"
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
	"time"

	ggcrname "github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testlayout"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// make release's script (.ci/release), run on a fresh commit of this
// tree for linux/amd64 and linux/arm into a temp folder: the checksums
// match the archives, the SBOMs, the image, its digest and the notes;
// their signature verifies with cosign verify-blob against the key pair
// the script made (and a changed checksums file does not); the SBOM names
// the module; the binary in the archive prints the version and commit it
// was stamped with; the image holds both platforms, each the archive's
// binary byte for byte, and goes to a registry and back under its digest;
// the notes of this pre-release are the Unreleased section.
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
	cmd.Env = append(os.Environ(), "VERSION="+version, "COMMIT="+head, "PLATFORMS=linux/amd64 linux/arm",
		"COSIGN="+cosign.Bin, "COSIGN_KEY=", "COSIGN_KEYLESS=0", "SOURCE=https://example.com/tend", "SOURCE_DATE_EPOCH=")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "release: %s", b)

	const name, arm = "tend_0.9.1-rc.1_linux_amd64", "tend_0.9.1-rc.1_linux_armv7"
	const image, digest, notes = "tend_0.9.1-rc.1_image.tar", "tend_0.9.1-rc.1_image.digest", "tend_0.9.1-rc.1_notes.md"
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
	const hubName, hubArm = "tend-hub_0.9.1-rc.1_linux_amd64", "tend-hub_0.9.1-rc.1_linux_armv7"
	const hubImage, hubDigest = "tend-hub_0.9.1-rc.1_image.tar", "tend-hub_0.9.1-rc.1_image.digest"
	require.Equal(t, []string{name + ".tar.gz", name + ".cdx.json", arm + ".tar.gz", arm + ".cdx.json", image, digest,
		hubName + ".tar.gz", hubName + ".cdx.json", hubArm + ".tar.gz", hubArm + ".cdx.json", hubImage, hubDigest, notes}, listed)

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
	require.Contains(t, bom.Metadata.Component.Purl, "pkg:golang/github.com/tend-dev/tend@"+version)
	var deps []string
	for _, c := range bom.Components {
		deps = append(deps, c.Name)
	}
	require.Contains(t, deps, "github.com/spf13/cobra")

	bin, armBin := filepath.Join(t.TempDir(), "tend"), filepath.Join(t.TempDir(), "tend")
	untar(t, filepath.Join(out, name+".tar.gz"), map[string]string{"tend": bin, "README.md": filepath.Join(t.TempDir(), "README.md")})
	untar(t, filepath.Join(out, arm+".tar.gz"), map[string]string{"tend": armBin, "README.md": filepath.Join(t.TempDir(), "README.md")})
	b, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Regexp(t, `^tend `+regexp.QuoteMeta(version)+` \(commit `+head+`, go\S+ linux/amd64\)\n$`, string(b))
	hubBin := filepath.Join(t.TempDir(), "tend-hub")
	untar(t, filepath.Join(out, hubName+".tar.gz"), map[string]string{"tend-hub": hubBin, "README.md": filepath.Join(t.TempDir(), "README.md")})
	b, err = exec.Command(hubBin, "version").CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Regexp(t, `^tend-hub `+regexp.QuoteMeta(version)+` \(commit `+head+`, go\S+ linux/amd64\)\n$`, string(b))
	hubIdx, _, hubLayout := testlayout.Read(t, filepath.Join(out, hubImage))
	hubMan, err := hubIdx.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, "tend-hub", hubMan.Annotations["org.opencontainers.image.title"])
	hubImg, err := hubIdx.Image(hubMan.Manifests[0].Digest)
	require.NoError(t, err)
	archived, err := os.ReadFile(hubBin)
	require.NoError(t, err)
	require.True(t, bytes.Equal(archived, imageFile(t, hubLayout, hubImg, "usr/local/bin/tend-hub")), "tend-hub's image holds the archive's binary")

	t.Run("image", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(out, digest))
		require.NoError(t, err)
		want, err := v1.NewHash(strings.TrimSpace(string(b)))
		require.NoError(t, err, "%s holds the index digest", digest)
		idx, ref, layoutDir := testlayout.Read(t, filepath.Join(out, image))
		require.Equal(t, version, ref, "the layout names the index by the version")
		got, err := idx.Digest()
		require.NoError(t, err)
		require.Equal(t, want, got)
		man, err := idx.IndexManifest()
		require.NoError(t, err)
		annotations := map[string]string{
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": head,
			"org.opencontainers.image.source":   "https://example.com/tend",
			"org.opencontainers.image.created":  "2026-01-02T15:04:05Z", // the commit's time: SOURCE_DATE_EPOCH unset
			"org.opencontainers.image.title":    "tend",
		}
		require.Equal(t, annotations, man.Annotations)
		require.Len(t, man.Manifests, 2)
		for i, want := range []struct{ platform, bin string }{{"linux/amd64", bin}, {"linux/arm/v7", armBin}} {
			desc := man.Manifests[i]
			require.Equal(t, want.platform, desc.Platform.String())
			img, err := idx.Image(desc.Digest)
			require.NoError(t, err)
			m, err := img.Manifest()
			require.NoError(t, err)
			require.Equal(t, annotations, m.Annotations)
			cf, err := img.ConfigFile()
			require.NoError(t, err)
			require.Equal(t, []string{"/usr/local/bin/tend"}, cf.Config.Entrypoint)
			archived, err := os.ReadFile(want.bin)
			require.NoError(t, err)
			require.True(t, bytes.Equal(archived, imageFile(t, layoutDir, img, "usr/local/bin/tend")),
				"%s: the image's binary is the archive's", want.platform)
		}

		reg := testoci.Start(t)
		tag, err := ggcrname.NewTag(reg.Host+"/tend:"+version, ggcrname.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.WriteIndex(tag, idx))
		pulled, err := remote.Index(tag.Context().Digest(want.String()))
		require.NoError(t, err)
		got, err = pulled.Digest()
		require.NoError(t, err)
		require.Equal(t, want, got)
		// Pulled back, each layer is the one in the archive: the
		// registry serves it under its digest, which remote checks as it
		// reads.
		for _, desc := range man.Manifests {
			img, err := pulled.Image(desc.Digest)
			require.NoError(t, err)
			layers, err := img.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 1)
			local, err := idx.Image(desc.Digest)
			require.NoError(t, err)
			m, err := local.Manifest()
			require.NoError(t, err)
			d, err := layers[0].Digest()
			require.NoError(t, err)
			require.Equal(t, m.Layers[0].Digest, d)
			rc, err := layers[0].Compressed()
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, rc)
			require.NoError(t, err, "%s: the layer pulled back matches its digest", desc.Platform)
			require.NoError(t, rc.Close())
		}
	})

	t.Run("notes", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(out, notes))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(b), "# tend v0.9.1-rc.1\n\nNot a release: the changes since the last one (CHANGELOG.md, Unreleased).\n\n"), "%s", b)
		cmd := exec.Command("bash", ".ci/notes", version)
		cmd.Dir = dir
		want, err := cmd.Output()
		require.NoError(t, err)
		require.Equal(t, string(want), string(b))
	})
}

// imageFile is the content of the file at path in img's single layer, a
// blob of the layout in dir, as tar reads it.
func imageFile(t *testing.T, dir string, img v1.Image, path string) []byte {
	t.Helper()
	m, err := img.Manifest()
	require.NoError(t, err)
	require.Len(t, m.Layers, 1)
	blob := filepath.Join(dir, "blobs", m.Layers[0].Digest.Algorithm, m.Layers[0].Digest.Hex)
	b, err := exec.Command("tar", "-xzOf", blob, path).Output()
	require.NoError(t, err, "%s in the image", path)
	return b
}

// untar writes each file of the .tar.gz at path named in want to the
// path want gives it, and fails when the archive holds any other entry
// or misses one. tar unpacks it: Go's gzip is several times slower under
// the race detector.
func untar(t *testing.T, path string, want map[string]string) {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("tar", "-xzf", path, "-C", dir).CombinedOutput()
	require.NoError(t, err, "tar -xzf %s: %s", path, out)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got, names []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	for n := range want {
		names = append(names, n)
	}
	require.ElementsMatch(t, names, got, "%s: entries", path)
	for n, dst := range want {
		require.NoError(t, os.Rename(filepath.Join(dir, n), dst))
	}
}

// .ci/release refuses to start, saying what is missing and how to get it,
// without VERSION, without COMMIT, without cosign, when asked to sign
// keyless without an identity token, and for a release version that
// CHANGELOG.md has no section for: before it builds anything.
func TestReleaseRefuses(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("zip"); err != nil {
		t.Skip("zip is not installed (the release's Windows archive): apt-get install zip")
	}
	cosign := testcosign.Program(t)
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	noToken := []string{"COSIGN_KEY=", "SIGSTORE_ID_TOKEN=", "ACTIONS_ID_TOKEN_REQUEST_URL="}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no version", []string{"VERSION=", "COMMIT=abc"}, "VERSION is not set: the version to stamp"},
		{"no commit", []string{"VERSION=v1.0.0", "COMMIT="}, "COMMIT is not set: the commit to stamp"},
		{"no cosign", []string{"VERSION=v1.0.0", "COMMIT=abc", "COSIGN=/nonexistent/cosign"},
			"release: no cosign at /nonexistent/cosign (COSIGN, else PATH, else "},
		{"keyless without a token", append([]string{"VERSION=v0.1.0", "COMMIT=abc", "COSIGN=" + cosign, "COSIGN_KEYLESS=1"}, noToken...),
			"sign: COSIGN_KEYLESS=1 but no OIDC identity token: set SIGSTORE_ID_TOKEN, or run in GitHub Actions with 'permissions: id-token: write'; or unset COSIGN_KEYLESS"},
		{"a release without notes", []string{"VERSION=v9.9.9", "COMMIT=abc", "COSIGN=" + cosign, "COSIGN_KEYLESS=0"},
			`notes: CHANGELOG.md has no entries under "## v9.9.9 — YYYY-MM-DD": a release's notes are its section; move the entries of "## Unreleased" under that heading`},
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

// A version's release notes (.ci/notes): a release version's own section,
// without its heading and comments; a pre-release, git describe's version
// or dev take their own section if it has entries, else Unreleased, and
// say so. A release version with no entries, and a changelog with neither
// the version nor Unreleased, are refused with what to add.
func TestReleaseNotes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	const changelog = `# Changelog

## Unreleased

<!-- How entries are added. -->

- next: a change

  more of it.

## v0.2.0-rc.2 — 2026-02-01

- the second candidate

## v0.1.1 — 2026-01-15

## v0.1.0 — 2026-01-01

<!-- a comment -->
- the first release
- its second entry
`
	file := filepath.Join(t.TempDir(), "CHANGELOG.md")
	require.NoError(t, os.WriteFile(file, []byte(changelog), 0o644))
	empty := filepath.Join(t.TempDir(), "CHANGELOG.md")
	require.NoError(t, os.WriteFile(empty, []byte("# Changelog\n\n## Unreleased\n\n<!-- How entries are added. -->\n\n## v0.1.0 — 2026-01-01\n\n- first\n"), 0o644))
	none := filepath.Join(t.TempDir(), "CHANGELOG.md")
	require.NoError(t, os.WriteFile(none, []byte("# Changelog\n\n## v0.1.0 — 2026-01-01\n\n- first\n"), 0o644))
	const unreleased = "Not a release: the changes since the last one (CHANGELOG.md, Unreleased).\n\n"
	for _, tc := range []struct {
		version, file, want, err string
	}{
		{version: "v0.1.0", file: file, want: "# tend v0.1.0\n\n- the first release\n- its second entry\n"},
		{version: "v0.2.0-rc.2", file: file, want: "# tend v0.2.0-rc.2\n\n- the second candidate\n"},
		{version: "v0.2.0-rc.1", file: file, want: "# tend v0.2.0-rc.1\n\n" + unreleased + "- next: a change\n\n  more of it.\n"},
		{version: "v0.1.0-3-gabcdef0-dirty", file: file, want: "# tend v0.1.0-3-gabcdef0-dirty\n\n" + unreleased + "- next: a change\n\n  more of it.\n"},
		{version: "dev", file: empty, want: "# tend dev\n\n" + unreleased + "No changes recorded.\n"},
		{version: "v0.1.1", file: file, err: `notes: ` + file + ` has no entries under "## v0.1.1 — YYYY-MM-DD"`},
		{version: "v0.3.0", file: file, err: `has no entries under "## v0.3.0 — YYYY-MM-DD": a release's notes are its section; move the entries of "## Unreleased" under that heading and commit, then release`},
		{version: "v0.3.0-rc.1", file: none, err: `notes: ` + none + ` has no "## Unreleased" section, where the notes of v0.3.0-rc.1 (not a release version: no section of its own) come from: add one`},
		{version: "v0.1.0", file: filepath.Join(t.TempDir(), "missing.md"), err: "missing.md: the release notes come from it"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			cmd := exec.Command("bash", filepath.Join(root, ".ci", "notes"), tc.version, tc.file)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if tc.err != "" {
				require.Error(t, err)
				require.Contains(t, stderr.String(), tc.err)
				require.Empty(t, stdout.String())
				return
			}
			require.NoError(t, err, stderr.String())
			require.Equal(t, tc.want, stdout.String())
		})
	}
}

// .ci/sign signs keyless when asked (COSIGN_KEYLESS=1) or when an
// identity token is at hand (SIGSTORE_ID_TOKEN, GitHub Actions'
// ACTIONS_ID_TOKEN_REQUEST_URL) and no key is given, and with a key
// otherwise. Keyless signing needs Sigstore's Fulcio and Rekor, which no
// test reaches: with a token they refuse (or, offline, cannot be asked),
// it fails saying what keyless signing needs and how to sign with a key
// instead, and leaves no bundle behind.
func TestSignKeyless(t *testing.T) {
	cosign := testcosign.New(t)
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	sign := func(ctx context.Context, env []string, args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, ".ci", "sign")}, args...)...)
		// cosign keeps Sigstore's TUF root under HOME (or TUF_ROOT): a
		// folder of the test's.
		cmd.Env = append(os.Environ(), "COSIGN="+cosign.Bin, "HOME="+cosign.Dir, "TUF_ROOT="+filepath.Join(cosign.Dir, "tuf"),
			"COSIGN_KEY=", "COSIGN_KEYLESS=", "SIGSTORE_ID_TOKEN=", "ACTIONS_ID_TOKEN_REQUEST_URL=")
		cmd.Env = append(cmd.Env, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string // the mode, or else the error
	}{
		{"by default with a key", nil, "key"},
		{"with a token: keyless", []string{"SIGSTORE_ID_TOKEN=eyJ"}, "keyless"},
		{"in GitHub Actions with id-token: keyless", []string{"ACTIONS_ID_TOKEN_REQUEST_URL=https://token.actions.example/"}, "keyless"},
		{"a key given wins over a token", []string{"SIGSTORE_ID_TOKEN=eyJ", "COSIGN_KEY=/etc/tend/cosign.key"}, "key"},
		{"COSIGN_KEYLESS=0 forces a key", []string{"SIGSTORE_ID_TOKEN=eyJ", "COSIGN_KEYLESS=0"}, "key"},
		{"COSIGN_KEYLESS=1 with a token", []string{"COSIGN_KEYLESS=1", "SIGSTORE_ID_TOKEN=eyJ"}, "keyless"},
		{"COSIGN_KEYLESS=1 without a token", []string{"COSIGN_KEYLESS=1"}, "sign: COSIGN_KEYLESS=1 but no OIDC identity token"},
		{"COSIGN_KEYLESS=1 and a key", []string{"COSIGN_KEYLESS=1", "SIGSTORE_ID_TOKEN=eyJ", "COSIGN_KEY=/k"},
			"sign: COSIGN_KEYLESS=1 and COSIGN_KEY are both set: unset one"},
		{"COSIGN_KEYLESS=yes", []string{"COSIGN_KEYLESS=yes"}, "sign: COSIGN_KEYLESS=yes: want 1 (keyless), 0 (with a key) or unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := sign(context.Background(), tc.env, "--check")
			if tc.want == "key" || tc.want == "keyless" {
				require.NoError(t, err, errOut)
				require.Equal(t, tc.want+"\n", out)
				return
			}
			require.Error(t, err)
			require.Contains(t, errOut, tc.want)
		})
	}

	file := filepath.Join(t.TempDir(), "tend_1.0.0_checksums.txt")
	require.NoError(t, os.WriteFile(file, []byte("0000  tend_1.0.0_linux_amd64.tar.gz\n"), 0o644))
	// A bound on a hung network call, not an expectation of speed:
	// cosign's own --timeout (3m) ends it first.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, errOut, err := sign(ctx, []string{"COSIGN_KEYLESS=1", "SIGSTORE_ID_TOKEN=not-a-token"}, file)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "cosign ended by itself")
	require.Contains(t, errOut, "sign: keyless signing of "+file+" failed (it needs an OIDC token Fulcio accepts and the network to Fulcio, "+
		"Rekor and Sigstore's TUF root; COSIGN_KEYLESS=0 signs with a key instead):\n")
	entries, err := os.ReadDir(filepath.Dir(file))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no bundle, no log: only the file")

	// With a key, in the same folder: a signature that verifies.
	_, errOut, err = sign(context.Background(), nil, file)
	require.NoError(t, err, errOut)
	cosign.Run("verify-blob", "--key", filepath.Join(filepath.Dir(file), "cosign.pub"), "--signature", file+".sig", "--insecure-ignore-tlog=true", file)
}
