package testpg

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// shared is the test binary's shared server: started by the first
// Database, stopped by Main.
var shared struct {
	mu      sync.Mutex
	main    bool    // Main is running the tests
	started bool    // launch was tried
	srv     *server // nil until started, or when it failed
	admin   *sql.DB // its postgres database, to create and drop others
	err     error
	n       int // databases created
}

// sharedSettings are the shared server's: every test of the package
// connects to it, up to -parallel at once, each with its pools.
var sharedSettings = []string{"max_connections=200"}

// Main runs the package's tests, then stops the server Database started
// (if any). Call it from TestMain: os.Exit(testpg.Main(m)).
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.admin.Close()
		if err := shared.srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
		shared.srv, shared.admin = nil, nil
	}
	return code
}

// Database creates a fresh database on the test binary's shared
// PostgreSQL server, started by the first call (one initdb and postgres
// per package, not one per test), and returns its URL; the database is
// dropped when the test ends. The package's TestMain must call Main,
// which stops the server. It skips and fails as Start does, and trusts
// every connection as Start's server does. A test that needs a server of
// its own (a password checked, a server stopped or killed) calls Start or
// StartWithPassword.
func Database(t testing.TB) string {
	t.Helper()
	bin := available(t)
	shared.mu.Lock()
	if !shared.main {
		shared.mu.Unlock()
		t.Fatal("testpg: the package's TestMain must call testpg.Main, which stops the shared server at the end")
	}
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = launch(bin, "", sharedSettings...)
		if shared.err == nil {
			shared.admin, shared.err = sql.Open("pgx", shared.srv.url("postgres"))
		}
	}
	if shared.err != nil {
		err := shared.err
		shared.mu.Unlock()
		t.Fatal(err)
	}
	shared.n++
	name := fmt.Sprintf("t%d", shared.n)
	srv, admin := shared.srv, shared.admin
	shared.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testpg: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// WITH (FORCE): a connection the test left open is ended.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testpg: drop database %s: %v", name, err)
		}
	})
	return srv.url(name)
}
