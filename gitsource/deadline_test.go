package gitsource

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// silentServer accepts TCP connections and never writes: an ssh client
// waits for its banner forever. It returns the port.
func silentServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close() // frees a client still stuck, should the test fail
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// sshTestAuth is an ssh key and a known_hosts file holding some other key
// for 127.0.0.1: the server never gets as far as showing its own.
func sshTestAuth(t *testing.T, port int) Auth {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(block), 0o600))
	signer, err := ssh.NewSignerFromKey(priv)
	require.NoError(t, err)
	line := fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(signer.PublicKey()))
	hosts := filepath.Join(dir, "known_hosts")
	require.NoError(t, os.WriteFile(hosts, []byte(line), 0o600))
	return Auth{SSHKeyFile: key, KnownHostsFile: hosts}
}

// sshForms are the ssh URL forms of a server on port, with the auth each
// needs.
func sshForms(t *testing.T, port int) map[string]Source {
	keyed := sshTestAuth(t, port)
	return map[string]Source{
		"user and key":                 {URL: fmt.Sprintf("ssh://git@127.0.0.1:%d/x", port), Auth: keyed},
		"default user":                 {URL: fmt.Sprintf("ssh://127.0.0.1:%d/org/x.git", port), Auth: keyed},
		"host name":                    {URL: fmt.Sprintf("ssh://git@localhost:%d/x", port), Auth: keyed},
		"password, insecure host keys": {URL: fmt.Sprintf("ssh://git:pw-secret@127.0.0.1:%d/x", port), Auth: Auth{InsecureIgnoreHostKey: true}},
	}
}

// TestSSHDeadlineDialer: an access with a deadline makes go-git's ssh
// transport give up on a server that never sends its banner.
func TestSSHDeadlineDialer(t *testing.T) {
	port := silentServer(t)
	for name, src := range sshForms(t, port) {
		t.Run(name, func(t *testing.T) {
			stored, urlAuth, err := endpoint(src.URL)
			require.NoError(t, err)
			acc, err := src.Auth.access(stored, urlAuth, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			start := time.Now() // before the deadline is set: a busy machine may pause between the two
			acc = acc.withDeadline(start.Add(500 * time.Millisecond))
			require.True(t, strings.HasPrefix(acc.proxy.URL, deadlineScheme+"://"), acc.proxy.URL)

			remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{stored}})
			done := make(chan error, 1)
			go func() {
				_, err := remote.List(&git.ListOptions{Auth: acc.auth, ProxyOptions: acc.proxy})
				done <- err
			}()
			select {
			case err := <-done:
				require.Error(t, err)
				require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond, "failed before the deadline: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("ssh list of a silent server hangs despite the deadline")
			}
		})
	}
}

// TestWithDeadlineSSHOnly: only ssh access gets the deadline dialer; the
// other transports watch the context themselves.
func TestWithDeadlineSSHOnly(t *testing.T) {
	until := time.Now().Add(time.Minute)
	require.Empty(t, access{}.withDeadline(until).proxy.URL)
	log := slog.New(slog.DiscardHandler)
	for _, raw := range []string{"https://tok:secret@host/x.git", "http://host/x.git", t.TempDir(), "git://host/x.git"} {
		stored, urlAuth, err := endpoint(raw)
		require.NoError(t, err)
		acc, err := Auth{}.access(stored, urlAuth, log)
		require.NoError(t, err)
		require.Empty(t, acc.withDeadline(until).proxy.URL, raw)
	}
	src := sshForms(t, 22)["user and key"]
	acc, err := src.Auth.access(src.URL, nil, log)
	require.NoError(t, err)
	require.Empty(t, acc.withDeadline(time.Time{}).proxy.URL, "zero deadline")
	require.Equal(t, fmt.Sprintf("%s://deadline?until=%d", deadlineScheme, until.UnixNano()), acc.withDeadline(until).proxy.URL)
	require.Empty(t, acc.proxy.URL, "withDeadline changed its receiver")
}

// TestFetchSSHServerSilent: Fetch honours its context's deadline against
// an ssh server that accepts the connection and never sends its banner.
func TestFetchSSHServerSilent(t *testing.T) {
	port := silentServer(t)
	for name, src := range sshForms(t, port) {
		t.Run(name, func(t *testing.T) {
			src.Ref = "main"
			start := time.Now() // before the deadline is set: a busy machine may pause between the two
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := Fetch(ctx, src, Options{Dir: filepath.Join(t.TempDir(), "git")})
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorContains(t, err, "timed out: raise source.timeout or check the link", "ended by its deadline")
				require.GreaterOrEqual(t, time.Since(start), time.Second)
				require.False(t, IsPermanent(err), "a timeout is not permanent: %v", err)
				require.NotContains(t, err.Error(), "pw-secret")
			case <-time.After(time.Minute):
				t.Fatal("Fetch from a silent ssh server ignores its context")
			}
		})
	}
}
