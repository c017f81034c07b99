package gitsource_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

// TestFetchVerifySSH signs commits with the real git and ssh-keygen
// (gpg.format=ssh, throwaway ed25519 keys) and verifies them against
// allowed signers files, as git verify-commit does with
// gpg.ssh.allowedSignersFile.
func TestFetchVerifySSH(t *testing.T) {
	r := testgit.NewRepo(t)
	alice, mallory := testgit.NewSSHSigner(t), testgit.NewSSHSigner(t)
	gpgKey := testgit.NewGPGKey(t, "Trusted <trusted@example.com>")
	r.WriteFile("devices/cam-017/models.yaml", "kind: models\n")
	rev := map[string]string{"main": r.CommitSigned("signed by alice", alice)}
	branch := func(name string, commit func() string) {
		r.Branch(name)
		rev[name] = commit()
		r.Checkout("main")
	}
	branch("mallory", func() string { return r.CommitSigned("signed by mallory", mallory) })
	branch("unsigned", func() string { return r.Commit("unsigned") })
	branch("pgp", func() string { return r.CommitSigned("signed with OpenPGP", gpgKey) })
	raw := r.Git("cat-file", "commit", rev["main"]) + "\n"
	require.Contains(t, raw, "-----BEGIN SSH SIGNATURE-----")
	rev["tampered"] = r.GitInput(strings.Replace(raw, "\nsigned by alice\n", "\nforged\n", 1), "hash-object", "-t", "commit", "-w", "--stdin")
	r.Git("branch", "tampered", rev["tampered"])

	key := alice.AuthorizedKey(t)
	allowed := testgit.WriteAllowedSigners(t, "# the fleet's signers", "", `alice@example.com namespaces="git" `+key)
	anyNamespace := testgit.WriteAllowedSigners(t, "alice@example.com "+key)
	quoted := testgit.WriteAllowedSigners(t, `"alice@example.com,bob@example.com" `+key)
	rotated := testgit.WriteAllowedSigners(t, "mallory@example.com "+mallory.AuthorizedKey(t), "alice@example.com "+key)
	fileNamespace := testgit.WriteAllowedSigners(t, `alice@example.com namespaces="file" `+key)
	notYet := testgit.WriteAllowedSigners(t, `alice@example.com valid-after="21000101" `+key)
	expired := testgit.WriteAllowedSigners(t, `alice@example.com valid-before="20010101Z" `+key)
	inWindow := testgit.WriteAllowedSigners(t, `alice@example.com valid-after="20010101",valid-before="21000101" `+key)
	badLine := testgit.WriteAllowedSigners(t, "alice@example.com")
	unknownOption := testgit.WriteAllowedSigners(t, `alice@example.com no-such-option `+key)
	keyring := testgit.WriteKeyring(t, gpgKey)
	missing := filepath.Join(t.TempDir(), "allowed_signers")

	cases := []struct {
		name     string
		ref      string
		trust    gitsource.Trust
		is       error    // with contains: the error wanted; nil = a node problem
		contains []string // nil = Fetch succeeds; {rev} is the target's hash[:12]
	}{
		{"listed signer", "main", gitsource.Trust{AllowedSigners: allowed}, nil, nil},
		{"any namespace", "main", gitsource.Trust{AllowedSigners: anyNamespace}, nil, nil},
		{"quoted principals", "main", gitsource.Trust{AllowedSigners: quoted}, nil, nil},
		{"second of two signers (rotation)", "main", gitsource.Trust{AllowedSigners: rotated}, nil, nil},
		{"inside its validity", "main", gitsource.Trust{AllowedSigners: inWindow}, nil, nil},
		{"OpenPGP beside SSH", "pgp", gitsource.Trust{Keyring: keyring, AllowedSigners: allowed}, nil, nil},
		{"SSH beside OpenPGP", "main", gitsource.Trust{Keyring: keyring, AllowedSigners: allowed}, nil, nil},
		{"unlisted key", "mallory", gitsource.Trust{AllowedSigners: allowed}, source.ErrUnverified,
			[]string{"commit {rev} of {url} is signed by SSH key SHA256:", "which " + allowed + " does not list; add a line PRINCIPAL namespaces=\"git\" ssh-ed25519 "}},
		{"unsigned", "unsigned", gitsource.Trust{AllowedSigners: allowed}, source.ErrUnverified,
			[]string{"commit {rev} of {url} is not signed; source.verify requires an SSH signature by a signer of " + allowed}},
		{"OpenPGP without a key ring", "pgp", gitsource.Trust{AllowedSigners: allowed}, source.ErrUnverified,
			[]string{"has an OpenPGP signature, and source.verify has no key ring"}},
		{"tampered", "tampered", gitsource.Trust{AllowedSigners: allowed}, source.ErrUnverified,
			[]string{"commit {rev} of {url}: the SSH signature by SHA256:", "does not verify"}},
		{"other namespace", "main", gitsource.Trust{AllowedSigners: fileNamespace}, source.ErrUnverified,
			[]string{"does not allow for it: line 1: the signer is allowed namespaces file, not git"}},
		{"not yet valid", "main", gitsource.Trust{AllowedSigners: notYet}, source.ErrUnverified,
			[]string{"line 1: the signer is valid after 2100-01-01"}},
		{"expired", "main", gitsource.Trust{AllowedSigners: expired}, source.ErrUnverified,
			[]string{"line 1: the signer is valid before 2001-01-01T00:00:00Z"}},
		{"file missing", "main", gitsource.Trust{AllowedSigners: missing}, nil,
			[]string{"read allowed signers " + missing + " (source.verify.ssh.allowedSigners)"}},
		{"line without a key", "main", gitsource.Trust{AllowedSigners: badLine}, nil,
			[]string{badLine + ":1: a principal alone, with no key"}},
		{"unknown option", "main", gitsource.Trust{AllowedSigners: unknownOption}, nil,
			[]string{unknownOption + `:1: unknown option "no-such-option"`}},
	}
	url := r.Dir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := gitsource.Source{URL: url, Ref: tc.ref, Path: "devices/cam-017", Trust: tc.trust}
			snap, err := fetch(t, t.TempDir(), src)
			if tc.contains == nil {
				require.NoError(t, err)
				require.Equal(t, rev[tc.ref], snap.Revision.Commit)
				return
			}
			require.Error(t, err)
			require.Nil(t, snap, "no files on refusal")
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			} else {
				require.NotErrorIs(t, err, source.ErrUnverified, "a signers file problem is the node's, not the commit's")
			}
			repl := strings.NewReplacer("{rev}", rev[tc.ref][:12], "{url}", url)
			for _, s := range tc.contains {
				require.Contains(t, err.Error(), repl.Replace(s))
			}
			t.Log(err)
		})
	}
	require.NoError(t, os.Remove(allowed))
}
