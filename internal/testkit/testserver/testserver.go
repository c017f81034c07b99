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
