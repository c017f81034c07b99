package testpg

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// binDir finds the directory of initdb and postgres: on PATH, else
// Debian's /usr/lib/postgresql/*/bin, newest first.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no initdb and postgres on PATH nor in /usr/lib/postgresql/*/bin: apt-get install postgresql")
}

// Start runs a PostgreSQL server until the test ends and returns the URL
// of its database. Without PostgreSQL installed it skips the test, unless
// CI is set (.ci/run installs it), where it fails. It trusts every
// connection: a password, when given, is not checked.
func Start(t testing.TB) string {
	t.Helper()
	return start(t, "")
}

// StartWithPassword runs a PostgreSQL server as Start does, whose
// superuser tend logs in with password (SCRAM-SHA-256) over TCP and the
// socket alike, and returns the URL of its database without the password.
// The password is letters and digits (it goes into a URL as it is).
func StartWithPassword(t testing.TB, password string) string {
	t.Helper()
	if password == "" {
		t.Fatal("testpg.StartWithPassword: give a password")
	}
	return start(t, password)
}

func start(t testing.TB, password string) string {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	// A directory the server's user can reach: t.TempDir's parents are
	// root's alone.
	dir, err := os.MkdirTemp("", "tend-testpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatalf("running as root, postgres needs an unprivileged user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	initdb := []string{"-D", data, "-U", "tend", "--auth=trust", "-E", "UTF8", "--no-sync"}
	if password != "" {
		pwfile := filepath.Join(dir, "pwfile")
		if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o644); err != nil { // the server's user reads it
			t.Fatal(err)
		}
		initdb = []string{"-D", data, "-U", "tend", "--auth=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--no-sync"}
	}
	if out, err := run("initdb", initdb...).CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	var logs bytes.Buffer
	srv := run("postgres", "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			<-exited
		}
	})
	url := fmt.Sprintf("postgres://tend@127.0.0.1:%d/postgres?sslmode=disable", port)
	ping := url
	if password != "" {
		ping = fmt.Sprintf("postgres://tend:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
	}
	db, err := sql.Open("pgx", ping)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			t.Fatalf("postgres exited: %v\n%s", werr, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not accept connections: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
