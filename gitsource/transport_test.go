package gitsource_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gittransport "github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

// Secrets the tests look for in every error, log line and clone config.
const (
	testPassword = "pa55-word-never-shown"
	testToken    = "tok-never-shown-123"
)

// remoteFleet is the fleet repo with a per-device branch besides main's
// per-device folders.
type remoteFleet struct {
	*fleet
	branchRev string // tip of branch devices/cam-017: device.yaml at its root
}

func newRemoteFleet(t *testing.T) *remoteFleet {
	f := &remoteFleet{fleet: newFleet(t)}
	r := f.repo
	r.Git("checkout", "--quiet", "--orphan", "devices/cam-017")
	r.Git("rm", "-r", "--quiet", "-f", ".")
	r.WriteFile("device.yaml", "kind: branch\n")
	f.branchRev = r.Commit("cam-017 on its own branch")
	r.Checkout("main")
	return f
}

// target is one of the two ways a device finds its manifests.
type target struct {
	name, ref, path string
	rev             func(f *remoteFleet) string
	file            string // a file the snapshot must hold
}

var targets = []target{
	{"per-device path", "main", "devices/cam-017", func(f *remoteFleet) string { return f.c1 }, "devices/cam-017/models.yaml"},
	{"per-device branch", "devices/cam-017", "", func(f *remoteFleet) string { return f.branchRev }, "device.yaml"},
}

// secretFile writes content to a fresh file and returns its path.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// fetchLogged runs Fetch with a debug logger and returns what it logged.
func fetchLogged(t *testing.T, dir string, src gitsource.Source) (*source.Snapshot, string, error) {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, Logger: log})
	return snap, buf.String(), err
}

// requireNoSecret fails when a test secret is in any of texts.
func requireNoSecret(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		require.NotContains(t, s, testPassword)
		require.NotContains(t, s, testToken)
	}
}

// requireCanceled checks that Fetch gives up on a cancelled context, and
// that this is not a permanent error.
func requireCanceled(t *testing.T, src gitsource.Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src.Ref = "main"
	_, err := gitsource.Fetch(ctx, src, gitsource.Options{Dir: t.TempDir()})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, gitsource.IsPermanent(err))
}

// requireWorks fetches src for every target and checks the result, the log
// and the clone's config.
func requireWorks(t *testing.T, f *remoteFleet, src gitsource.Source) string {
	t.Helper()
	var logs string
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			dir := t.TempDir()
			src.Ref, src.Path = tg.ref, tg.path
			snap, log, err := fetchLogged(t, dir, src)
			require.NoError(t, err)
			require.Equal(t, tg.rev(f), snap.Revision.Commit)
			require.Contains(t, paths(snap), tg.file)
			cfg, err := os.ReadFile(filepath.Join(dir, "config"))
			require.NoError(t, err)
			requireNoSecret(t, log, string(cfg), snap.URL)
			logs += log
		})
	}
	return logs
}

// failure is a Fetch that must fail with a clear, permanent or transient,
// error that carries no secret.
type failure struct {
	name      string
	src       gitsource.Source
	contains  []string
	is        error // nil: no particular sentinel
	permanent bool
}

func requireFails(t *testing.T, cases []failure) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.src.Ref == "" {
				tc.src.Ref = "main"
			}
			_, log, err := fetchLogged(t, t.TempDir(), tc.src)
			require.Error(t, err)
			t.Log(err)
			for _, s := range tc.contains {
				require.Contains(t, err.Error(), s)
			}
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.Equal(t, tc.permanent, gitsource.IsPermanent(err), "IsPermanent(%v)", err)
			requireNoSecret(t, err.Error(), log)
		})
	}
}

func TestFetchHTTPS(t *testing.T) {
	f := newRemoteFleet(t)
	parent := filepath.Dir(f.repo.Dir())
	basic := testgit.StartHTTPS(t, parent, testgit.HTTPSOptions{User: "alice", Password: testPassword})
	token := testgit.StartHTTPS(t, parent, testgit.HTTPSOptions{Token: testToken})
	basicURL, tokenURL := f.repo.URL(basic.URL), f.repo.URL(token.URL)
	withUser := func(u, userinfo string) string { return strings.Replace(u, "https://", "https://"+userinfo+"@", 1) }
	user, pass := secretFile(t, "alice\n"), secretFile(t, testPassword+"\r\n")
	tok := secretFile(t, testToken+"\n")

	works := []struct {
		name  string
		src   gitsource.Source
		users []string // basic-auth user names the server saw
	}{
		{"username and password files", gitsource.Source{URL: basicURL,
			Auth: gitsource.Auth{UsernameFile: user, PasswordFile: pass, CAFile: basic.CAFile}}, nil},
		{"credentials in URL", gitsource.Source{URL: withUser(basicURL, "alice:"+testPassword),
			Auth: gitsource.Auth{CAFile: basic.CAFile}}, nil},
		{"files win over URL", gitsource.Source{URL: withUser(basicURL, "mallory:wrong"),
			Auth: gitsource.Auth{UsernameFile: user, PasswordFile: pass, CAFile: basic.CAFile}}, nil},
		{"token file", gitsource.Source{URL: tokenURL,
			Auth: gitsource.Auth{TokenFile: tok, CAFile: token.CAFile}}, []string{gitsource.DefaultTokenUser}},
		{"token file with username file", gitsource.Source{URL: tokenURL,
			Auth: gitsource.Auth{TokenFile: tok, UsernameFile: secretFile(t, "x-access-token"), CAFile: token.CAFile}}, []string{"x-access-token"}},
	}
	for _, tc := range works {
		t.Run(tc.name, func(t *testing.T) {
			requireWorks(t, f, tc.src)
			for _, u := range tc.users {
				require.Contains(t, token.Users(), u)
			}
		})
	}

	t.Run("rotated token is read at the next fetch", func(t *testing.T) {
		file := secretFile(t, "expired-token\n")
		src := gitsource.Source{URL: tokenURL, Ref: "main", Path: "devices/cam-017", Auth: gitsource.Auth{TokenFile: file, CAFile: token.CAFile}}
		dir := t.TempDir()
		_, _, err := fetchLogged(t, dir, src)
		require.ErrorIs(t, err, gittransport.ErrAuthenticationRequired)
		require.NoError(t, os.WriteFile(file, []byte(testToken+"\n"), 0o600))
		_, _, err = fetchLogged(t, dir, src)
		require.NoError(t, err)
	})

	t.Run("cancelled", func(t *testing.T) {
		requireCanceled(t, gitsource.Source{URL: tokenURL, Auth: gitsource.Auth{TokenFile: tok, CAFile: token.CAFile}})
	})

	missing := filepath.Join(t.TempDir(), "missing")
	badCA := secretFile(t, "not a certificate\n")
	requireFails(t, []failure{
		{"wrong password", gitsource.Source{URL: basicURL,
			Auth: gitsource.Auth{UsernameFile: user, PasswordFile: secretFile(t, "wrong-"+testPassword), CAFile: basic.CAFile}},
			[]string{basicURL}, gittransport.ErrAuthenticationRequired, true},
		{"wrong password in URL", gitsource.Source{URL: withUser(basicURL, "alice:"+testPassword+"x"),
			Auth: gitsource.Auth{CAFile: basic.CAFile}},
			[]string{basicURL}, gittransport.ErrAuthenticationRequired, true},
		{"no credentials", gitsource.Source{URL: basicURL, Auth: gitsource.Auth{CAFile: basic.CAFile}},
			[]string{basicURL}, gittransport.ErrAuthenticationRequired, true},
		{"no caFile", gitsource.Source{URL: basicURL, Auth: gitsource.Auth{UsernameFile: user, PasswordFile: pass}},
			[]string{basicURL, "certificate"}, nil, true},
		{"missing password file", gitsource.Source{URL: basicURL,
			Auth: gitsource.Auth{UsernameFile: user, PasswordFile: missing, CAFile: basic.CAFile}},
			[]string{"source.auth.passwordFile", missing}, nil, true},
		{"empty token file", gitsource.Source{URL: tokenURL, Auth: gitsource.Auth{TokenFile: secretFile(t, "\n")}},
			[]string{"source.auth.tokenFile", "is empty"}, nil, true},
		{"caFile without certificate", gitsource.Source{URL: tokenURL, Auth: gitsource.Auth{CAFile: badCA}},
			[]string{"source.auth.caFile", badCA, "no PEM certificate"}, nil, true},
		{"ssh settings on an https URL", gitsource.Source{URL: tokenURL, Auth: gitsource.Auth{SSHKeyFile: missing}},
			[]string{"source.auth.sshKeyFile", "is http(s)"}, nil, true},
		{"missing repository", gitsource.Source{URL: token.URL + "/no-such-repo", Auth: gitsource.Auth{TokenFile: tok, CAFile: token.CAFile}},
			[]string{token.URL + "/no-such-repo"}, gittransport.ErrRepositoryNotFound, true},
		{"missing branch", gitsource.Source{URL: tokenURL, Ref: "devices/cam-999", Auth: gitsource.Auth{TokenFile: tok, CAFile: token.CAFile}},
			[]string{"devices/cam-999"}, gitsource.ErrRefNotFound, true},
	})
}

func TestFetchSSH(t *testing.T) {
	f := newRemoteFleet(t)
	sshd := testgit.StartSSHD(t, filepath.Dir(f.repo.Dir()))
	url := f.repo.URL(sshd.URL)
	key, known := sshd.KeyFile, sshd.KnownHostsFile
	auth := gitsource.Auth{SSHKeyFile: key, KnownHostsFile: known}

	t.Run("key and known_hosts", func(t *testing.T) {
		requireWorks(t, f, gitsource.Source{URL: url, Auth: auth})
	})
	t.Run("password in URL is neither stored nor shown", func(t *testing.T) {
		withPass := strings.Replace(url, "@", ":"+testPassword+"@", 1)
		requireWorks(t, f, gitsource.Source{URL: withPass, Auth: auth})
	})
	t.Run("insecureIgnoreHostKey", func(t *testing.T) {
		logs := requireWorks(t, f, gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: key, InsecureIgnoreHostKey: true}})
		require.Equal(t, len(targets), strings.Count(logs, "level=WARN msg=\"host key not checked:"), logs)
	})

	t.Run("cancelled", func(t *testing.T) { requireCanceled(t, gitsource.Source{URL: url, Auth: auth}) })

	_, otherPub := testgit.GenerateSSHKey(t)
	otherKey, _ := testgit.GenerateSSHKey(t)
	changed := secretFile(t, sshd.KnownHostsLine(otherPub))
	unknownHost := secretFile(t, "[127.0.0.1]:1 "+sshd.HostKey+"\n")
	missing := filepath.Join(t.TempDir(), "id_missing")
	closedURL := "ssh://" + sshd.User + "@127.0.0.1:1" + f.repo.Dir()
	requireFails(t, []failure{
		{"host key changed", gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: changed}},
			[]string{"host key of " + sshd.Addr(), "does not match", "source.auth.knownHostsFile " + changed}, nil, true},
		{"host not in known_hosts", gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: unknownHost}},
			[]string{"host key of " + sshd.Addr(), "is unknown", unknownHost, "ssh-keyscan -p"}, nil, true},
		{"neither knownHostsFile nor insecureIgnoreHostKey", gitsource.Source{URL: closedURL, Auth: gitsource.Auth{SSHKeyFile: key}},
			[]string{"set source.auth.knownHostsFile"}, nil, true},
		{"missing key file", gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: missing, KnownHostsFile: known}},
			[]string{"source.auth.sshKeyFile", missing}, nil, true},
		{"no key file", gitsource.Source{URL: url, Auth: gitsource.Auth{KnownHostsFile: known}},
			[]string{"set source.auth.sshKeyFile"}, nil, true},
		{"missing known_hosts file", gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: missing}},
			[]string{"source.auth.knownHostsFile", missing}, nil, true},
		{"key not authorized", gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: otherKey, KnownHostsFile: known}},
			[]string{"unable to authenticate"}, nil, true},
		{"https settings on an ssh URL", gitsource.Source{URL: url, Auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: known, TokenFile: missing}},
			[]string{"source.auth.tokenFile", "is ssh"}, nil, true},
		{"missing repository", gitsource.Source{URL: sshd.URL + "/no-such-repo", Auth: auth},
			nil, gittransport.ErrRepositoryNotFound, true},
		{"missing path", gitsource.Source{URL: url, Path: "devices/cam-999", Auth: auth},
			[]string{"devices/cam-999"}, source.ErrPathNotFound, true},
		{"server down", gitsource.Source{URL: closedURL, Auth: auth},
			[]string{"connection refused"}, nil, false},
	})
}
