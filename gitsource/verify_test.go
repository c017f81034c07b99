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

// signedFleet is a fleet repo whose branches each end in a commit signed
// (or not) in one way, by throwaway keys made with the real gpg:
//
//	main        signed by trusted
//	unsigned    not signed
//	untrusted   signed by untrusted
//	second      signed by second
//	subkey      signed by the signing subkey of withSubkey
//	on-unsigned signed by trusted, on top of unsigned
//	ssh         signed with an SSH key (gpg.format=ssh)
//	tampered    main's commit with another message and main's signature
type signedFleet struct {
	repo                                   *testgit.Repo
	trusted, second, untrusted, withSubkey *testgit.GPGKey
	rev                                    map[string]string // branch → commit
}

func newSignedFleet(t *testing.T) *signedFleet {
	t.Helper()
	f := &signedFleet{
		repo:       testgit.NewRepo(t),
		trusted:    testgit.NewGPGKey(t, "Trusted <trusted@example.com>"),
		second:     testgit.NewGPGKey(t, "Second <second@example.com>"),
		untrusted:  testgit.NewGPGKey(t, "Mallory <mallory@example.com>"),
		withSubkey: testgit.NewGPGKey(t, "Subkey <subkey@example.com>"),
		rev:        map[string]string{},
	}
	primary := f.withSubkey.ID
	f.withSubkey.AddSigningSubkey()
	require.NotEqual(t, primary, f.withSubkey.ID, "signatures name the subkey")
	r := f.repo
	r.WriteFile("devices/cam-017/models.yaml", "kind: models\n")
	f.rev["main"] = r.CommitSigned("trusted change", f.trusted)

	branch := func(name string, commit func() string) {
		r.Branch(name)
		f.rev[name] = commit()
		r.Checkout("main")
	}
	branch("unsigned", func() string { return r.Commit("unsigned change") })
	branch("untrusted", func() string { return r.CommitSigned("untrusted change", f.untrusted) })
	branch("second", func() string { return r.CommitSigned("second change", f.second) })
	branch("subkey", func() string { return r.CommitSigned("subkey change", f.withSubkey) })
	branch("ssh", func() string { return r.CommitSigned("ssh change", testgit.NewSSHSigner(t)) })
	r.Checkout("unsigned")
	branch("on-unsigned", func() string { return r.CommitSigned("signed on top", f.trusted) })

	// Same tree, parent and signature as main, another message.
	raw := r.Git("cat-file", "commit", f.rev["main"]) + "\n"
	require.Contains(t, raw, "-----BEGIN PGP SIGNATURE-----")
	forged := strings.Replace(raw, "\ntrusted change\n", "\nforged change\n", 1)
	f.rev["tampered"] = r.GitInput(forged, "hash-object", "-t", "commit", "-w", "--stdin")
	r.Git("branch", "tampered", f.rev["tampered"])
	return f
}

func TestFetchVerify(t *testing.T) {
	f := newSignedFleet(t)
	trusted := testgit.WriteKeyring(t, f.trusted)
	twoKeys := testgit.WriteKeyring(t, f.trusted, f.second)
	twoBlocks := testgit.WriteKeyringBlocks(t, f.trusted, f.second)
	subkeyRing := testgit.WriteKeyring(t, f.withSubkey)
	missing := filepath.Join(t.TempDir(), "trusted.asc")
	notArmored := filepath.Join(t.TempDir(), "trusted.asc")
	require.NoError(t, os.WriteFile(notArmored, []byte("not a key\n"), 0o644))

	cases := []struct {
		name     string
		ref      string
		path     string // "" = devices/cam-017
		keyring  string
		is       error    // with contains: the error wanted; nil = any
		contains []string // "" = Fetch succeeds; {rev} is the target's hash[:12], {url} the source
	}{
		{"signed by a trusted key", "main", "", trusted, nil, nil},
		{"no key ring, unsigned", "unsigned", "", "", nil, nil},
		{"unsigned", "unsigned", "", trusted, source.ErrUnverified,
			[]string{"commit {rev} of {url} is not signed; source.verify requires an OpenPGP signature by a key of " + trusted}},
		{"unsigned, checked before the path", "unsigned", "devices/cam-999", trusted, source.ErrUnverified,
			[]string{"commit {rev} of {url} is not signed"}},
		{"signed by an untrusted key", "untrusted", "", trusted, source.ErrUnverified,
			[]string{"commit {rev} of {url} is signed by key " + f.untrusted.ID, "not in the key ring " + trusted}},
		{"second key of two in one block", "second", "", twoKeys, nil, nil},
		{"second key of two in two blocks", "second", "", twoBlocks, nil, nil},
		{"first key of two in two blocks", "main", "", twoBlocks, nil, nil},
		{"second key, ring without it", "second", "", trusted, source.ErrUnverified,
			[]string{"signed by key " + f.second.ID}},
		{"signing subkey", "subkey", "", subkeyRing, nil, nil},
		{"signing subkey, ring without it", "subkey", "", trusted, source.ErrUnverified,
			[]string{"signed by key " + f.withSubkey.ID}},
		{"signed on top of an unsigned commit", "on-unsigned", "", trusted, nil, nil},
		{"SSH signature", "ssh", "", trusted, source.ErrUnverified,
			[]string{"commit {rev} of {url} has an SSH signature, and source.verify lists no SSH signers; set source.verify.ssh.allowedSigners"}},
		{"tampered commit", "tampered", "", trusted, source.ErrUnverified,
			[]string{"commit {rev} of {url}: the signature by key " + f.trusted.ID, "does not verify"}},
		{"key ring missing", "main", "", missing, nil,
			[]string{"read key ring " + missing + " (source.verify.keyring)", "no such file"}},
		{"key ring not armored", "main", "", notArmored, nil,
			[]string{"read key ring " + notArmored + ": no OpenPGP public key found"}},
	}
	for _, tr := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"local path", func(t *testing.T) string { return f.repo.Dir() }},
		{"http", func(t *testing.T) string { return f.repo.URL(testgit.ServeHTTP(t, filepath.Dir(f.repo.Dir()))) }},
	} {
		t.Run(tr.name, func(t *testing.T) {
			url := tr.url(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					path := tc.path
					if path == "" {
						path = "devices/cam-017"
					}
					src := gitsource.Source{URL: url, Ref: tc.ref, Path: path, Trust: gitsource.Trust{Keyring: tc.keyring}}
					snap, err := fetch(t, t.TempDir(), src)
					if tc.contains == nil {
						require.NoError(t, err)
						require.Equal(t, f.rev[tc.ref], snap.Revision.Commit)
						return
					}
					require.Error(t, err)
					require.Nil(t, snap, "no files on refusal")
					if tc.is != nil {
						require.ErrorIs(t, err, tc.is)
					} else {
						require.NotErrorIs(t, err, source.ErrUnverified, "a key ring problem is the node's, not the commit's")
					}
					repl := strings.NewReplacer("{rev}", f.rev[tc.ref][:12], "{url}", url)
					for _, s := range tc.contains {
						require.Contains(t, err.Error(), repl.Replace(s))
					}
					t.Log(err)
				})
			}
		})
	}
}
