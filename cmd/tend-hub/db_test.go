package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/testkit/testhub"
	"github.com/tend-dev/tend/internal/testkit/testpg"
)

func TestHubDBFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := file("db", "  postgres://tend@db/hub?password=FileSecret\n")
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
		from      string
		err       string
	}{
		{name: "default", want: hub.DefaultDB, from: "--db"},
		{name: "environment", env: "sqlite:///env.db", want: "sqlite:///env.db", from: envHubDB},
		{name: "--db before the environment", env: "sqlite:///env.db", args: []string{"--db", "sqlite:///flag.db"}, want: "sqlite:///flag.db", from: "--db"},
		{name: "--db-file, trimmed", env: "sqlite:///env.db", args: []string{"--db-file", good}, want: "postgres://tend@db/hub?password=FileSecret", from: "--db-file " + good},
		{name: "both flags", args: []string{"--db", "sqlite:///flag.db", "--db-file", good}, err: "--db and --db-file exclude each other"},
		{name: "empty file", args: []string{"--db-file", file("empty", "\n")}, err: "holds no database URL"},
		{name: "two lines", args: []string{"--db-file", file("two", "sqlite:///a.db\nsqlite:///b.db\n")}, err: "holds no database URL"},
		{name: "no file", args: []string{"--db-file", filepath.Join(dir, "none")}, err: "--db-file: open " + filepath.Join(dir, "none")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envHubDB, c.env)
			var d dbFlags
			fs := pflag.NewFlagSet("hub", pflag.ContinueOnError)
			d.register(fs)
			require.NoError(t, fs.Parse(c.args))
			got, from, err := d.resolve()
			if c.err != "" {
				assert.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.from, from)
		})
	}
}

// The database's password, however it is given, is in no log line, no
// error and, from --db-file or TEND_HUB_DB, not in the hub's command line;
// in --db, the hub warns that ps shows it. The PostgreSQL here trusts
// every login, so the password is not checked: hub's
// TestPostgresPasswordSources checks that it is used.
func TestHubDatabasePasswordStaysOutOfLogsAndPs(t *testing.T) {
	needHub(t)
	const secret = "QuerySecret"
	withPassword := testpg.Start(t) + "&password=" + secret
	dbFile := filepath.Join(t.TempDir(), "hub-db")
	require.NoError(t, os.WriteFile(dbFile, []byte(withPassword+"\n"), 0o600))
	noSecret := func(t *testing.T, texts ...string) {
		t.Helper()
		for _, s := range texts {
			assert.NotContains(t, s, secret)
		}
	}

	t.Run("tokens", func(t *testing.T) {
		out, errOut, code := testhub.Run(t, hubBin, nil, "token", "create", "cam-1", "--db-file", dbFile)
		require.Equal(t, 0, code, errOut)
		noSecret(t, out, errOut)
		assert.NotContains(t, errOut, "ps shows")
		out, errOut, code = testhub.Run(t, hubBin, []string{envHubDB + "=" + withPassword}, "token", "revoke", "cam-1")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "Revoked 1 token(s) of device cam-1: its reports are refused from now on.\n", out)
		out, errOut, code = testhub.Run(t, hubBin, []string{envHubDB + "=" + withPassword}, "token", "revoke", "cam-1")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, `device "cam-1" has no token in postgres://tend@127.0.0.1:`)
		assert.Contains(t, errOut, "password=xxxxx")
		noSecret(t, out, errOut)
		_, errOut, code = testhub.Run(t, hubBin, nil, "token", "create", "cam-1", "--db", withPassword, "--db-file", dbFile)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "--db and --db-file exclude each other")
	})

	t.Run("--db warns", func(t *testing.T) {
		h := testhub.Start(t, hubBin, withPassword, "", nil)
		logs := h.Logs()
		noSecret(t, logs)
		assert.Contains(t, logs, "hub listening")
		assert.Contains(t, logs, "password=xxxxx")
		assert.Contains(t, logs, "ps shows to every user")
	})

	t.Run("--db-file", func(t *testing.T) {
		addr := testhub.FreeAddr(t)
		var logs bytes.Buffer
		cmd := exec.Command(hubBin, "--listen", addr, "--db-file", dbFile, "--public-read", "--log-format", "text")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 20*time.Second, 50*time.Millisecond)
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		require.NoError(t, err)
		assert.Contains(t, string(cmdline), "--db-file")
		noSecret(t, string(cmdline))
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		<-exited
		noSecret(t, logs.String())
		assert.Contains(t, logs.String(), "hub listening")
		assert.NotContains(t, logs.String(), "ps shows")
		assert.True(t, strings.Contains(logs.String(), "password=xxxxx"), logs.String())
	})
}

// With --max-connections 2 and two connections open (each mid-request),
// a third is not served until one of them closes. Not being answered is
// checked for a while: a slow machine could only hide a regression, never
// fail a hub that keeps the bound.
func TestHubMaxConnections(t *testing.T) {
	needHub(t)
	h := testhub.Start(t, hubBin, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"), "", []string{"--max-connections", "2"})
	addr := strings.TrimPrefix(h.URL, "http://")
	http.DefaultClient.CloseIdleConnections() // testhub.Start's, kept alive
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: hub\r\n")) // headers not finished: the hub waits
		require.NoError(t, err)
		held = append(held, c)
	}
	answered := make(chan int, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(h.URL + "/healthz")
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("a third connection was served (%d) while two were open", code)
	case <-time.After(500 * time.Millisecond):
	}
	require.NoError(t, held[0].Close())
	select {
	case code := <-answered:
		assert.Equal(t, http.StatusOK, code)
	case <-time.After(20 * time.Second):
		t.Fatal("the third connection was not served once one closed")
	}
}
