package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testmqtt"
)

// CI merges and runs tend notify: an agent whose schedule is an hour
// applies the merged commit at once. Wrong credentials and a broker that
// is not there are errors that say so.
func TestNotifyTicksRunningAgent(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{Users: map[string]string{"ci": "ci-secret", "cam-017": "device-secret"}})
	secrets := t.TempDir()
	secret := func(name, content string) string {
		f := filepath.Join(secrets, name)
		require.NoError(t, os.WriteFile(f, []byte(content+"\n"), 0o600))
		return f
	}
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	first := repo.Commit("first")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1h")
	config := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(config, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nnotify:\n  mqtt:\n"+
		"    url: "+b.URL+"\n    topic: tend/fleet/main\n"+
		"    usernameFile: "+secret("device-user", "cam-017")+"\n    passwordFile: "+secret("device-password", "device-secret")+"\n"), 0o644))
	n.flags = append(n.flags, "--config", config)
	a := startAgent(t, n)
	eventually(t, func() bool {
		s := a.status()
		notify, _ := s["notify"].(map[string]any)
		return s["appliedRevision"] == "HEAD@sha1:"+first && notify["connected"] == true
	})

	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.9\n", "")))
	second := repo.Commit("second")
	ci := []string{"notify", "--mqtt", b.URL, "--topic", "tend/fleet/main", "--username-file", secret("ci-user", "ci")}
	out, errOut, code := tend(t, append(ci, "--password-file", secret("ci-password", "ci-secret"), "--revision", second)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Notified tend/fleet/main on "+b.URL+" (revision "+second+").\n", out)
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+second })
	require.Equal(t, "threshold: 0.9\n", n.read("etc/infer/config.yaml"))
	metrics, _ := a.get("/metrics")
	require.Contains(t, metrics, `tend_notify_total{result="tick"} 1`)
	require.Contains(t, metrics, `tend_notify_total{result="skipped"} 0`)
	require.Contains(t, metrics, `tend_notify_total{result="error"} 0`)
	out, errOut, code = n.tend("status", "--listen", a.addr)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Notify:           subscribed to tend/fleet/main on "+b.URL+" since ")

	wrong := secret("wrong-password", "not-the-secret")
	_, errOut, code = tend(t, append(ci, "--password-file", wrong)...)
	require.Equal(t, 1, code)
	require.Equal(t, "Error: MQTT broker "+b.URL+" refused the connection (not Authorized) with the user name and password from "+
		filepath.Join(secrets, "ci-user")+" and "+wrong+": check them against the broker's password file and ACL: not Authorized\n", errOut)
	require.NotContains(t, errOut, "not-the-secret")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nowhere := "tcp://" + l.Addr().String()
	require.NoError(t, l.Close())
	_, errOut, code = tend(t, "notify", "--mqtt", nowhere, "--topic", "tend/fleet/main")
	require.Equal(t, 1, code)
	require.True(t, strings.HasPrefix(errOut, "Error: cannot reach MQTT broker "+nowhere+": dial tcp "), errOut)
	require.Contains(t, errOut, "connection refused; check the URL and that the broker runs and listens there")
}
