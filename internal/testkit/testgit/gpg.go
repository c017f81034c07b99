package testgit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Signer signs the commits CommitSigned makes: a *GPGKey or an *SSHSigner.
type Signer interface {
	// gitConfig returns the git -c options and the environment that make
	// git commit -S sign with this key.
	gitConfig() (cfg, env []string)
}

// CommitSigned is Commit with the new commit signed by s, as git commit -S
// signs it.
func (r *Repo) CommitSigned(msg string, s Signer) string {
	r.t.Helper()
	cfg, env := s.gitConfig()
	r.Git("add", "-A")
	r.run(env, "", cfg, "commit", "--quiet", "--allow-empty", "-S", "-m", msg)
	return r.Head()
}

// CommitSignedAt is CommitSigned with when as the author and committer
// date (GIT_COMMITTER_DATE), which the signature covers.
func (r *Repo) CommitSignedAt(msg string, s Signer, when time.Time) string {
	r.t.Helper()
	cfg, env := s.gitConfig()
	date := when.Format(time.RFC3339)
	r.Git("add", "-A")
	r.run(append(env, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date), "", cfg, "commit", "--quiet", "--allow-empty", "-S", "-m", msg)
	return r.Head()
}

// GPGKey is a throwaway OpenPGP key without a passphrase, made by the real
// gpg in a GNUPGHOME of its own. On t.Cleanup the gpg-agent that gpg
// started for that home is stopped and the home removed.
type GPGKey struct {
	// Fingerprint is the primary key's fingerprint, upper-case hex.
	Fingerprint string
	// ID is the long key id (16 upper-case hex digits) of the key that
	// signs, as a signature names its issuer: the primary key's, or the
	// newest signing subkey's once AddSigningSubkey has been called.
	ID string

	t    testing.TB
	home string
}

// NewGPGKey makes an ed25519 signing key for uid, e.g.
// "Tend Test <test@example.com>". It fails the test when gpg is missing:
// CI installs it.
func NewGPGKey(t testing.TB, uid string) *GPGKey {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Fatalf("testgit: gpg is needed to sign commits (apt-get install gnupg): %v", err)
	}
	// Not t.TempDir(): gpg-agent's socket lives in the home, and a socket
	// path must fit in 108 bytes.
	home, err := os.MkdirTemp("", "tend-gpg-")
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	k := &GPGKey{t: t, home: home}
	t.Cleanup(func() {
		cmd := exec.Command("gpgconf", "--kill", "all")
		cmd.Env = k.env()
		_ = cmd.Run()
		_ = os.RemoveAll(home)
	})
	k.gpg("--quick-gen-key", uid, "ed25519", "sign", "never")
	k.Fingerprint, k.ID = k.keyIDs()
	return k
}

// AddSigningSubkey adds an ed25519 signing subkey; gpg signs with it from
// then on, and ID becomes its id.
func (k *GPGKey) AddSigningSubkey() {
	k.t.Helper()
	k.gpg("--quick-add-key", k.Fingerprint, "ed25519", "sign", "never")
	k.Fingerprint, k.ID = k.keyIDs()
}

// PublicKey is the armored public key, as gpg --export --armor writes it.
func (k *GPGKey) PublicKey() string {
	k.t.Helper()
	return string(k.gpg("--armor", "--export", k.Fingerprint))
}

func (k *GPGKey) gitConfig() (cfg, env []string) {
	return []string{
		"-c", "gpg.format=openpgp",
		"-c", "gpg.program=gpg",
		"-c", "user.signingkey=" + k.Fingerprint,
	}, []string{"GNUPGHOME=" + k.home}
}

// keyIDs reads the primary fingerprint and the id of the signing key from
// gpg's machine-readable key listing.
func (k *GPGKey) keyIDs() (fingerprint, id string) {
	k.t.Helper()
	var lastType, newest string
	for _, line := range strings.Split(string(k.gpg("--with-colons", "--fixed-list-mode", "--list-keys")), "\n") {
		f := strings.Split(line, ":")
		switch {
		case len(f) > 11 && f[0] == "pub":
			id = f[4]
		case len(f) > 11 && f[0] == "sub" && strings.Contains(f[11], "s") && f[5] >= newest:
			id, newest = f[4], f[5]
		case len(f) > 9 && f[0] == "fpr" && lastType == "pub":
			fingerprint = f[9]
		}
		if len(f) > 0 && f[0] != "fpr" && f[0] != "grp" {
			lastType = f[0]
		}
	}
	if fingerprint == "" || id == "" {
		k.t.Fatalf("testgit: no key in gpg's listing of %s", k.home)
	}
	return fingerprint, id
}

// gpg runs gpg in batch mode in the key's home and returns its output.
func (k *GPGKey) gpg(args ...string) []byte {
	k.t.Helper()
	all := append([]string{"--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", ""}, args...)
	cmd := exec.Command("gpg", all...)
	cmd.Env = k.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		k.t.Fatalf("testgit: gpg %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func (k *GPGKey) env() []string {
	return append(os.Environ(), "GNUPGHOME="+k.home)
}

// WriteKeyring writes the public keys into one armored block, as
// gpg --export --armor KEY1 KEY2 does, and returns the file's path.
func WriteKeyring(t testing.TB, keys ...*GPGKey) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	for _, k := range keys {
		if _, err := w.Write(k.gpg("--export", k.Fingerprint)); err != nil {
			t.Fatalf("testgit: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return writeTemp(t, "trusted.asc", buf.String()+"\n")
}

// WriteKeyringBlocks writes each public key as an armored block of its
// own, one after the other, as cat a.asc b.asc does, and returns the
// file's path.
func WriteKeyringBlocks(t testing.TB, keys ...*GPGKey) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.PublicKey())
	}
	return writeTemp(t, "trusted.asc", b.String())
}

// SSHSigner is a throwaway ed25519 SSH key without a passphrase, for commits
// signed with gpg.format=ssh.
type SSHSigner struct {
	// Path is the private key file; the public key is Path + ".pub".
	Path string
}

// NewSSHSigner makes the key with ssh-keygen in t.TempDir().
func NewSSHSigner(t testing.TB) *SSHSigner {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_ed25519")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tend test", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("testgit: ssh-keygen: %v\n%s", err, out)
	}
	return &SSHSigner{Path: path}
}

func (k *SSHSigner) gitConfig() (cfg, env []string) {
	return []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + k.Path}, nil
}

// writeTemp writes content to a file named name in a fresh t.TempDir().
func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return path
}

// AuthorizedKey returns the public key as one authorized_keys line
// ("ssh-ed25519 AAAA… tend test").
func (k *SSHSigner) AuthorizedKey(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(k.Path + ".pub")
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// WriteAllowedSigners writes lines as an allowed signers file (git's
// gpg.ssh.allowedSignersFile) and returns its path.
func WriteAllowedSigners(t testing.TB, lines ...string) string {
	t.Helper()
	return writeTemp(t, "allowed_signers", strings.Join(lines, "\n")+"\n")
}
