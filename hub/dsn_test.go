package hub

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testpg"
)

func TestRedactDSN(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"userinfo", "postgres://tend:UserSecret@db:5432/hub", "postgres://tend:xxxxx@db:5432/hub"},
		{"query password", "postgres://tend@db/hub?sslmode=verify-full&password=QuerySecret", "postgres://tend@db/hub?sslmode=verify-full&password=xxxxx"},
		{"sslpassword", "postgres://tend@db/hub?sslpassword=KeySecret&sslkey=/k.pem", "postgres://tend@db/hub?sslpassword=xxxxx&sslkey=/k.pem"},
		{"encoded key", "postgres://tend@db/hub?pass%77ord=EncSecret", "postgres://tend@db/hub?pass%77ord=xxxxx"},
		{"upper-case key", "postgresql://tend@db/hub?PASSWORD=UpSecret", "postgresql://tend@db/hub?PASSWORD=xxxxx"},
		{"both", "postgres://a:UserSecret@db/hub?password=QuerySecret", "postgres://a:xxxxx@db/hub?password=xxxxx"},
		{"no secret", "postgres://tend@db/hub?sslmode=disable", "postgres://tend@db/hub?sslmode=disable"},
		{"sqlite", "sqlite:///var/lib/tend/hub.db", "sqlite:///var/lib/tend/hub.db"},
		{"key=value", "host=db user=tend password=KVSecret dbname=hub", "host=db user=tend password=xxxxx dbname=hub"},
		{"key = 'quoted value'", "host=db password = 'KV Secret\\' x' sslpassword=SSLSecret", "host=db password = xxxxx sslpassword=xxxxx"},
		{"unparsable URL", "postgres://tend:Bad%zzSecret@db/hub", "postgres://(a URL that does not parse, not shown)"},
		{"bad port holds a password", "postgres://tend@db:PortSecret/hub", "postgres://(a URL that does not parse, not shown)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := RedactDSN(c.in)
			assert.Equal(t, c.want, got)
			assert.NotContains(t, got, "Secret")
		})
	}
}

// Every error Open gives for a database URL it refuses or cannot reach
// names it without its password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"host=db user=tend password=KVSecret", `--db "host=db user=tend password=xxxxx" is a key=value connection string; the hub takes a URL`},
		{"POSTGRES://tend:UserSecret@db/hub", "--db postgres://tend:xxxxx@db/hub: write it postgres://USER@HOST/DB (the scheme in lower case"},
		{"sqlite://tend:UserSecret@host/hub.db", "--db sqlite://tend:xxxxx@host/hub.db: name an absolute file path"},
		{"mysql://tend:UserSecret@db/hub?password=QuerySecret", `--db mysql://tend:xxxxx@db/hub?password=xxxxx: unknown scheme "mysql"`},
		{"postgres://tend@db:PortSecret/hub", `--db "postgres://(a URL that does not parse, not shown)" is not a database URL`},
	} {
		_, err := Open(context.Background(), c.url)
		require.Error(t, err, c.url)
		assert.ErrorContains(t, err, c.want)
		assert.NotContains(t, err.Error(), "Secret")
	}
}

// The PostgreSQL password reaches the hub in the URL, in PGPASSWORD or in
// a password file (PGPASSFILE, else ~/.pgpass), and is shown in none of
// the hub's logs or errors. The server checks passwords (SCRAM), so a
// URL that works without one proves the password came from elsewhere.
func TestPostgresPasswordSources(t *testing.T) {
	const secret = "QuerySecret1234"
	base := testpg.StartWithPassword(t, secret)
	u, err := url.Parse(base)
	require.NoError(t, err)
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))

	open := func(t *testing.T, dbURL string) error {
		t.Helper()
		s, err := Open(context.Background(), dbURL)
		if err != nil {
			return err
		}
		defer s.Close()
		assert.NotContains(t, s.String(), secret)
		return nil
	}

	t.Run("without a password the server refuses", func(t *testing.T) {
		err := open(t, base)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "password")
		assert.Contains(t, err.Error(), "PGPASSWORD")
	})
	t.Run("a wrong password is not shown", func(t *testing.T) {
		wrong := strings.Replace(base, "tend@", "tend:WrongSecret9@", 1)
		err := open(t, wrong)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "WrongSecret9")
		assert.Contains(t, err.Error(), "tend:xxxxx@")
	})
	t.Run("in the query", func(t *testing.T) {
		require.NoError(t, open(t, base+"&password="+secret))
		s, err := Open(context.Background(), base+"&password="+secret)
		require.NoError(t, err)
		defer s.Close()
		assert.Equal(t, base+"&password=xxxxx", s.String())
	})
	t.Run("PGPASSWORD", func(t *testing.T) {
		t.Setenv("PGPASSWORD", secret)
		require.NoError(t, open(t, base))
	})
	t.Run("PGPASSFILE", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "pgpass")
		require.NoError(t, os.WriteFile(file, []byte(u.Hostname()+":"+u.Port()+":*:tend:"+secret+"\n"), 0o600))
		t.Setenv("PGPASSFILE", file)
		require.NoError(t, open(t, base))
	})
	t.Run("~/.pgpass", func(t *testing.T) {
		home := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(home, ".pgpass"), []byte("*:*:*:tend:"+secret+"\n"), 0o600))
		t.Setenv("HOME", home)
		os.Unsetenv("PGPASSFILE") //nolint:errcheck // t.Setenv above restores it
		require.NoError(t, open(t, base))
	})
}
