package gitsource

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

func TestEndpoint(t *testing.T) {
	local := t.TempDir()
	cases := []struct {
		name, in, stored string
		auth             transport.AuthMethod
		// what go-git makes of stored, for ssh: user, host, port, path
		sshEndpoint []any
	}{
		{"scp-like", "git@github.com:org/fleet.git", "git@github.com:org/fleet.git", nil,
			[]any{"git", "github.com", 22, "org/fleet.git"}},
		{"scp-like without user", "git.example.com:fleet.git", "git.example.com:fleet.git", nil,
			[]any{"", "git.example.com", 22, "fleet.git"}},
		{"scp-like with @ in path", "host:team@2/fleet.git", "host:team@2/fleet.git", nil,
			[]any{"", "host", 22, "team@2/fleet.git"}},
		{"scp-like absolute path", "deploy@10.0.0.5:/srv/git/fleet", "deploy@10.0.0.5:/srv/git/fleet", nil,
			[]any{"deploy", "10.0.0.5", 22, "/srv/git/fleet"}},
		{"ssh URL with port", "ssh://git@host:2222/org/fleet.git", "ssh://git@host:2222/org/fleet.git", nil,
			[]any{"git", "host", 2222, "/org/fleet.git"}},
		{"ssh URL without user", "ssh://host/fleet.git", "ssh://host/fleet.git", nil,
			[]any{"", "host", 0, "/fleet.git"}},
		{"ssh URL with password", "ssh://deploy:s3cret@host/fleet.git", "ssh://deploy@host/fleet.git",
			&gitssh.Password{User: "deploy", Password: "s3cret"}, []any{"deploy", "host", 0, "/fleet.git"}},
		{"https with token", "https://tok3n@host/fleet.git", "https://host/fleet.git",
			&githttp.BasicAuth{Username: "tok3n"}, nil},
		{"https with user and password", "https://u:s3cret@host/fleet.git", "https://host/fleet.git",
			&githttp.BasicAuth{Username: "u", Password: "s3cret"}, nil},
		{"local path", local, local, nil, nil},
		{"local path with colon after slash", "/srv/git:old/fleet", "/srv/git:old/fleet", nil, nil},
		{"file URL", "file:///srv/git/fleet", "file:///srv/git/fleet", nil, nil},
		{"git protocol", "git://host/fleet.git", "git://host/fleet.git", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stored, auth, err := endpoint(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.stored, stored)
			require.Equal(t, tc.auth, auth)
			if tc.sshEndpoint == nil {
				require.NotEqual(t, kindSSH, urlKind(stored))
				return
			}
			require.Equal(t, kindSSH, urlKind(stored))
			ep, err := transport.NewEndpoint(stored)
			require.NoError(t, err)
			require.Equal(t, "ssh", ep.Protocol)
			require.Equal(t, tc.sshEndpoint, []any{ep.User, ep.Host, ep.Port, ep.Path})
		})
	}

	errCases := []struct{ name, in, want string }{
		{"empty", "", "no repository URL"},
		{"scp-like with password", "git:s3cret@host:fleet.git", "cannot carry a password"},
		{"scp-like with user but no host", "git@:fleet.git", "neither a URL"},
		{"scp-like without host", ":fleet.git", "neither a URL"},
		{"scp-like without path", "host:", "neither a URL"},
		{"ssh URL without path", "ssh://git:s3cret@host", "ssh://host needs a host and a path"},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := endpoint(tc.in)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}

func TestAccess(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	tok, user := file("token", "t0ken\r\n\n"), file("user", "x-token-auth\n")
	key, _ := testgit.GenerateSSHKey(t)
	known := file("known_hosts", "host.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPqd3Ddf2BSE6/sp54lIjFeuzXuUQ+WCEFYymmmHn8fA\n")
	encrypted := filepath.Join(dir, "encrypted")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "passphrase", "-f", encrypted).CombinedOutput()
	require.NoError(t, err, string(out))

	cases := []struct {
		name, url string
		urlAuth   transport.AuthMethod
		auth      Auth
		want      transport.AuthMethod // the inner method for ssh
		err       string
	}{
		{"token with the default user", "https://host/f.git", nil, Auth{TokenFile: tok},
			&githttp.BasicAuth{Username: DefaultTokenUser, Password: "t0ken"}, ""},
		{"token with a user file", "https://host/f.git", nil, Auth{TokenFile: tok, UsernameFile: user},
			&githttp.BasicAuth{Username: "x-token-auth", Password: "t0ken"}, ""},
		{"file wins over URL", "https://host/f.git", &githttp.BasicAuth{Username: "u", Password: "old"}, Auth{TokenFile: tok},
			&githttp.BasicAuth{Username: DefaultTokenUser, Password: "t0ken"}, ""},
		{"URL credentials alone", "https://host/f.git", &githttp.BasicAuth{Username: "u", Password: "p"}, Auth{},
			&githttp.BasicAuth{Username: "u", Password: "p"}, ""},
		{"password without user", "https://host/f.git", nil, Auth{PasswordFile: tok}, nil, "passwordFile needs source.auth.usernameFile"},
		{"user without secret", "https://host/f.git", nil, Auth{UsernameFile: user}, nil, "usernameFile needs"},
		{"token and password", "https://host/f.git", nil, Auth{TokenFile: tok, PasswordFile: tok, UsernameFile: user}, nil, "not both"},
		{"caFile on plain http", "http://host/f.git", nil, Auth{CAFile: tok}, nil, "not https"},
		{"credentials for a local path", "/srv/git/fleet", nil, Auth{TokenFile: tok}, nil, "takes no credentials"},
		{"ssh default user", "ssh://host.example/f.git", nil, Auth{SSHKeyFile: key, KnownHostsFile: known}, &gitssh.PublicKeys{User: DefaultSSHUser}, ""},
		{"ssh user from scp-like URL", "deploy@host.example:f.git", nil, Auth{SSHKeyFile: key, KnownHostsFile: known}, &gitssh.PublicKeys{User: "deploy"}, ""},
		{"ssh password from URL", "ssh://deploy@host.example/f.git", &gitssh.Password{User: "deploy", Password: "pw"},
			Auth{KnownHostsFile: known}, &gitssh.Password{User: "deploy", Password: "pw"}, ""},
		{"ssh key file wins over URL password", "ssh://deploy@host.example/f.git", &gitssh.Password{User: "deploy", Password: "pw"},
			Auth{SSHKeyFile: key, KnownHostsFile: known}, &gitssh.PublicKeys{User: "deploy"}, ""},
		{"ssh both host key settings", "ssh://host.example/f.git", nil, Auth{SSHKeyFile: key, KnownHostsFile: known, InsecureIgnoreHostKey: true}, nil, "not both"},
		{"ssh encrypted key", "ssh://host.example/f.git", nil, Auth{SSHKeyFile: encrypted, KnownHostsFile: known}, nil, "encrypted with a passphrase"},
		{"ssh key file not a key", "ssh://host.example/f.git", nil, Auth{SSHKeyFile: known, KnownHostsFile: known}, nil, "source.auth.sshKeyFile " + known},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acc, err := tc.auth.access(tc.url, tc.urlAuth, slog.New(slog.DiscardHandler))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.True(t, IsPermanent(err))
				require.NotContains(t, err.Error(), "t0ken")
				return
			}
			require.NoError(t, err)
			got := acc.auth
			if s, ok := got.(*sshAuth); ok {
				got = s.AuthMethod
				cfg, err := s.ClientConfig()
				require.NoError(t, err)
				require.Equal(t, sshDialTimeout, cfg.Timeout)
				require.NotNil(t, cfg.HostKeyCallback)
			}
			switch want := tc.want.(type) {
			case *gitssh.PublicKeys:
				require.IsType(t, want, got)
				require.Equal(t, want.User, got.(*gitssh.PublicKeys).User)
			default:
				if p, ok := got.(*gitssh.Password); ok {
					p.HostKeyCallbackHelper = gitssh.HostKeyCallbackHelper{}
				}
				require.Equal(t, tc.want, got)
			}
		})
	}
}

func TestAccessWarnsOnEveryInsecureFetch(t *testing.T) {
	key, _ := testgit.GenerateSSHKey(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	a := Auth{SSHKeyFile: key, InsecureIgnoreHostKey: true}
	for range 2 {
		_, err := a.access("ssh://git@host.example:2222/fleet.git", nil, log)
		require.NoError(t, err)
	}
	require.Equal(t, 2, strings.Count(buf.String(), `level=WARN msg="host key not checked: source.auth.insecureIgnoreHostKey is set`), buf.String())
	require.Contains(t, buf.String(), "url=ssh://host.example:2222/fleet.git")
}

// TestKnownHostsAlgorithms checks that only the key types known_hosts holds
// for the server are asked for: a server with an ed25519 and an RSA key
// would otherwise present ed25519 to a client that only knows its RSA key.
func TestKnownHostsAlgorithms(t *testing.T) {
	rsaKey := filepath.Join(t.TempDir(), "rsa")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", rsaKey).CombinedOutput()
	require.NoError(t, err, string(out))
	pub, err := os.ReadFile(rsaKey + ".pub")
	require.NoError(t, err)
	known := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(known, []byte("[git.example]:2222 "+string(pub)), 0o600))

	helper, err := knownHosts(known, "git.example:2222")
	require.NoError(t, err)
	require.Contains(t, helper.HostKeyAlgorithms, "rsa-sha2-256")
	for _, a := range helper.HostKeyAlgorithms {
		require.NotContains(t, a, "ed25519")
	}
}

func TestIsPermanent(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"ref not found", notFound(ErrRefNotFound, "ref %q not found", "x"), true},
		{"path not found", fmt.Errorf("read: %w", notFound(source.ErrPathNotFound, "nope")), true},
		{"authentication required", fmt.Errorf("list refs: %w", redactErr(fmt.Errorf("%w: go away", transport.ErrAuthenticationRequired), "https://u:p@h/x")), true},
		{"authorization failed", transport.ErrAuthorizationFailed, true},
		{"repository not found", transport.ErrRepositoryNotFound, true},
		{"ssh authentication", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"), true},
		{"host key", fmt.Errorf("ssh: handshake failed: %w", &hostKeyError{err: errors.New("knownhosts: key mismatch")}), true},
		{"untrusted certificate", fmt.Errorf("get: %w", x509.UnknownAuthorityError{}), true},
		{"auth configuration", &permanentError{errors.New("set source.auth.knownHostsFile")}, true},
		{"connection refused", fmt.Errorf("list refs: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), false},
		{"timeout", fmt.Errorf("list refs: %w", context.DeadlineExceeded), false},
		{"canceled", context.Canceled, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
		{"server error", errors.New("unexpected client error: unexpected requesting \"x\" status code: 502"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, IsPermanent(tc.err))
		})
	}
}
