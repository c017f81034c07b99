package testgit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// gitEnv runs git isolated from the user's configuration, with env added,
// and returns its combined output and error.
func gitEnv(env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), append([]string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}, env...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestStartHTTPS(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("x.yaml", "x: 1\n")
	head := r.Commit("x")
	parent := filepath.Dir(r.Dir())
	open := testgit.StartHTTPS(t, parent, testgit.HTTPSOptions{})
	basic := testgit.StartHTTPS(t, parent, testgit.HTTPSOptions{User: "alice", Password: "s3cret"})
	token := testgit.StartHTTPS(t, parent, testgit.HTTPSOptions{Token: "tok-123"})
	hostOf := func(s *testgit.HTTPSServer) string { return strings.TrimPrefix(s.URL, "https://") }

	cases := []struct {
		name   string
		srv    *testgit.HTTPSServer
		url    string
		caFile string
		wantOK bool
		output string // in git's output on failure
	}{
		{"trusted CA", open, open.URL, open.CAFile, true, ""},
		{"untrusted CA", open, open.URL, "", false, "certificate"},
		{"basic auth", basic, "https://alice:s3cret@" + hostOf(basic), basic.CAFile, true, ""},
		{"wrong password", basic, "https://alice:nope@" + hostOf(basic), basic.CAFile, false, "Authentication failed"},
		{"no credentials", basic, basic.URL, basic.CAFile, false, "could not read Username"},
		{"token with any user", token, "https://git:tok-123@" + hostOf(token), token.CAFile, true, ""},
		{"wrong token", token, "https://git:tok-456@" + hostOf(token), token.CAFile, false, "Authentication failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.caFile != "" {
				env = []string{"GIT_SSL_CAINFO=" + tc.caFile}
			}
			out, err := gitEnv(env, "ls-remote", r.URL(tc.url), "refs/heads/main")
			if !tc.wantOK {
				require.Error(t, err)
				require.Contains(t, out, tc.output)
				return
			}
			require.NoError(t, err, out)
			require.Equal(t, head+"\trefs/heads/main", out)
		})
	}
	require.Contains(t, basic.Users(), "alice")
	require.Contains(t, token.Users(), "git")
	require.FileExists(t, open.CAFile)
}

func TestStartSSHD(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("x.yaml", "x: 1\n")
	head := r.Commit("x")
	sshd := testgit.StartSSHD(t, filepath.Dir(r.Dir()))
	require.True(t, strings.HasPrefix(sshd.HostKey, "ssh-ed25519 "), sshd.HostKey)
	other, _ := testgit.GenerateSSHKey(t)

	sshCmd := func(key, knownHosts string) string {
		return "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes" +
			" -o UserKnownHostsFile=" + knownHosts + " -i " + key
	}
	cases := []struct {
		name       string
		key, known string
		wantOK     bool
		output     string
	}{
		{"authorized key", sshd.KeyFile, sshd.KnownHostsFile, true, ""},
		{"other key", other, sshd.KnownHostsFile, false, "Permission denied"},
		{"unknown host", sshd.KeyFile, os.DevNull, false, "Host key verification failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := gitEnv([]string{"GIT_SSH_COMMAND=" + sshCmd(tc.key, tc.known)}, "ls-remote", r.URL(sshd.URL), "refs/heads/main")
			if !tc.wantOK {
				require.Error(t, err)
				require.Contains(t, out, tc.output)
				return
			}
			require.NoError(t, err, out)
			require.Equal(t, head+"\trefs/heads/main", out)
		})
	}

	t.Run("closed", func(t *testing.T) {
		sshd.Close()
		sshd.Close()
		_, err := gitEnv([]string{"GIT_SSH_COMMAND=" + sshCmd(sshd.KeyFile, sshd.KnownHostsFile)}, "ls-remote", r.URL(sshd.URL))
		require.Error(t, err)
	})
}
