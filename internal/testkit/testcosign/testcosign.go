// Package testcosign runs the real cosign CLI for tests: it makes key
// pairs and signs artifacts in a registry, as CI would before a release.
package testcosign

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Version is the cosign .ci/run installs.
const Version = "v3.1.3"

// Program returns the path of the cosign CLI: from PATH, else from the
// tools folder .ci/run installs it in (TEND_TOOLS, default
// ~/.cache/tend-tools, its bin). Without it the test is skipped, except in
// CI (CI set in the environment), where its absence is a failure. With
// -short it is skipped.
func Program(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: the cosign CLI; make test runs it, -short skips it")
	}
	if p, err := exec.LookPath("cosign"); err == nil {
		return p
	}
	p := filepath.Join(ToolsDir(), "bin", "cosign")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	why := "cosign is not installed: GOBIN=" + filepath.Dir(p) + " go install github.com/sigstore/cosign/v3/cmd/cosign@" + Version + " (as .ci/run does)"
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// ToolsDir is where .ci/run keeps the tools it builds: TEND_TOOLS, else
// ~/.cache/tend-tools.
func ToolsDir() string {
	if d := os.Getenv("TEND_TOOLS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tend-tools")
	}
	return filepath.Join(home, ".cache", "tend-tools")
}

// Cosign runs one cosign CLI in a folder of its own, offline: no
// transparency log, no TUF, no proxy.
type Cosign struct {
	t   testing.TB
	Bin string
	Dir string // its working folder and HOME
}

// New finds the CLI (see Program) and gives it a folder.
func New(t testing.TB) *Cosign {
	t.Helper()
	return &Cosign{t: t, Bin: Program(t), Dir: t.TempDir()}
}

// Run runs cosign with args, failing the test when it fails; it returns
// its output.
func (c *Cosign) Run(args ...string) string {
	c.t.Helper()
	out, err := c.Try(args...)
	if err != nil {
		c.t.Fatalf("cosign %v: %v\n%s", args, err, out)
	}
	return out
}

// Try runs cosign with args and returns its output and error.
func (c *Cosign) Try(args ...string) (string, error) {
	cmd := exec.Command(c.Bin, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "HOME="+c.Dir, "COSIGN_PASSWORD=", "COSIGN_YES=true", "SIGSTORE_NO_CACHE=true",
		"TUF_ROOT="+filepath.Join(c.Dir, ".sigstore"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// KeyPair makes a key pair in a folder of its own, named name, and
// returns the paths of its private and public key.
func (c *Cosign) KeyPair(name string) (priv, pub string) {
	c.t.Helper()
	dir := filepath.Join(c.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.Bin, "generate-key-pair")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+c.Dir, "COSIGN_PASSWORD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// Sign signs ref (HOST/REPO@sha256:…, on a plain HTTP registry) with the
// private key priv, offline: with a signing config that names no
// transparency log or timestamp authority (cosign v3's way of
// --tlog-upload=false), so the signature is a Sigstore bundle cosign
// attaches as a referrer.
func (c *Cosign) Sign(priv, ref string) {
	c.t.Helper()
	cfg := filepath.Join(c.Dir, "offline-signing-config.json")
	if _, err := os.Stat(cfg); err != nil {
		c.Run("signing-config", "create", "--out", cfg)
	}
	c.Run("sign", "--key", priv, "--signing-config", cfg, "--allow-http-registry", "--allow-insecure-registry", ref)
}

// Attest attaches to ref an in-toto attestation of predicate (JSON, of
// predicate type custom) signed with priv, offline as Sign signs: a
// Sigstore bundle cosign attaches as a referrer, as a vulnerability
// scanner or a provenance step of CI would.
func (c *Cosign) Attest(priv, ref, predicate string) {
	c.t.Helper()
	cfg := filepath.Join(c.Dir, "offline-signing-config.json")
	if _, err := os.Stat(cfg); err != nil {
		c.Run("signing-config", "create", "--out", cfg)
	}
	f, err := os.CreateTemp(c.Dir, "predicate-*.json")
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := f.WriteString(predicate); err != nil {
		c.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		c.t.Fatal(err)
	}
	c.Run("attest", "--key", priv, "--signing-config", cfg, "--predicate", f.Name(), "--type", "custom",
		"--allow-http-registry", "--allow-insecure-registry", ref)
}

// SignLegacy signs ref as Sign does, in cosign's legacy format: a
// simple signing payload in the manifest tagged sha256-HEX.sig, as cosign
// v2 wrote by default.
func (c *Cosign) SignLegacy(priv, ref string) {
	c.t.Helper()
	c.Run("sign", "--key", priv, "--use-signing-config=false", "--tlog-upload=false", "--new-bundle-format=false",
		"--allow-http-registry", "--allow-insecure-registry", ref)
}
