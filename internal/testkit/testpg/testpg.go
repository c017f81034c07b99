package testpg

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
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
	return "", errors.New("no initdb and postgres on PATH nor in /usr/lib/postgresql/*/bin: apt-get install postgresql")
}

// available skips t with -short, and without PostgreSQL installed (fails
// it in CI, where .ci/run installs it), and returns the folder of initdb
// and postgres.
func available(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a PostgreSQL server; make test runs it, -short skips it")
	}
	bin, err := binDir()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return bin
}

// Start runs a PostgreSQL server until the test ends and returns the URL
// of its database. Without PostgreSQL installed it skips the test, unless
// CI is set (.ci/run installs it), where it fails; with -short it skips.
// It trusts every connection: a password, when given, is not checked. A
// test that needs no server of its own takes a database of the package's
// shared server instead (Database).
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
	bin := available(t)
	s, err := launch(bin, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Log(err)
		}
	})
	return s.url("postgres")
}

// server is a running postgres in its own temp folder.
type server struct {
	dir    string
	port   int
	proc   *os.Process
	exited chan error
}

// url is the URL of database db on s, as its superuser tend, without a
// password.
func (s *server) url(db string) string {
	return fmt.Sprintf("postgres://tend@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// stop shuts s down (fast shutdown, killed after 30 s) and removes its
// folder.
func (s *server) stop() error {
	defer os.RemoveAll(s.dir)
	s.proc.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		s.proc.Kill()
		<-s.exited
		return fmt.Errorf("testpg: postgres in %s did not stop within 30s: killed", s.dir)
	}
}

// launch runs initdb and postgres (from bin) in a new temp folder, the
// superuser tend's password checked when one is given, with settings
// added to postgres's command line (-c name=value), and waits until it
// accepts connections.
func launch(bin, password string, settings ...string) (_ *server, err error) {
	// A directory the server's user can reach: t.TempDir's parents are
	// root's alone.
	dir, err := os.MkdirTemp("", "tend-testpg-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root, postgres needs an unprivileged user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
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
			return nil, err
		}
		initdb = []string{"-D", data, "-U", "tend", "--auth=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--no-sync"}
	}
	if out, err := run("initdb", initdb...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	var logs bytes.Buffer
	srv := run("postgres", args...)
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &server{dir: dir, port: port, proc: srv.Process, exited: make(chan error, 1)}
	go func() { s.exited <- srv.Wait() }()
	ping := s.url("postgres")
	if password != "" {
		ping = fmt.Sprintf("postgres://tend:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
	}
	if err := waitReady(ping, s.exited); err != nil {
		s.proc.Kill()
		<-s.exited
		return nil, fmt.Errorf("%w\n%s", err, logs.String())
	}
	return s, nil
}

// waitReady pings url until the server answers (a minute at most), or
// exited says it is gone.
func waitReady(url string, exited chan error) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			exited <- werr // for whoever waits next
			return fmt.Errorf("postgres exited: %v", werr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
