// Package testserver finds the programs of the servers tests run beside
// tend (Debian's docker-registry, mosquitto, sshd) and a free loopback
// port for them.
package testserver

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Program returns the path of program, from PATH or else from Debian's
// /usr/sbin (outside a user's PATH). Without it the test is skipped,
// except in CI (CI set in the environment), where .ci/run installs the
// Debian package pkg and its absence is a failure.
func Program(t testing.TB, program, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(program); err == nil {
		return p
	}
	sbin := filepath.Join("/usr/sbin", program)
	if _, err := os.Stat(sbin); err == nil {
		return sbin
	}
	why := program + " is not installed (apt-get install " + pkg + ")"
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// FreeAddr is a host:port on 127.0.0.1 that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitServing waits until addr accepts a TCP connection; with again, first
// until it refuses one (a killed server is gone), so that what answers is
// the new one. It polls every 0.5 ms, for at most a minute: the wait of a
// benchmark that times a restart, not a bound on it.
func WaitServing(t testing.TB, addr string, again bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	gone := !again
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			if gone {
				return
			}
		} else {
			gone = true
		}
		time.Sleep(500 * time.Microsecond)
	}
	t.Fatalf("%s does not serve", addr)
}
