package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testhub"
)

// hubBin is tend-hub, built by TestMain as make build ships it; with
// -short none is built (see needHub).
var hubBin string

// TestMain builds tend-hub for the tests that run it. With -short it
// builds none: those tests are skipped and the unit tests run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "tend-hub-e2e-")
	if err != nil {
		panic(err)
	}
	if hubBin, err = testhub.Build(dir, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needHub skips a test that runs tend-hub with -short, which builds none:
// make test runs it.
func needHub(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the tend-hub binary; make test runs it, -short skips it")
	}
}

// Each command's help lists the flags it uses, and only those.
func TestHelp(t *testing.T) {
	needHub(t)
	for _, command := range [][]string{nil, {"token", "create"}, {"token", "revoke"}, {"device", "reset"}, {"version"}} {
		name := "tend-hub"
		if command != nil {
			name = strings.Join(command, "-")
		}
		t.Run(name, func(t *testing.T) {
			out, errOut, code := testhub.Run(t, hubBin, nil, append(command, "--help")...)
			require.Equal(t, 0, code, errOut)
			golden.Assert(t, filepath.Join("help", name+".golden"), []byte(out))
		})
	}
	out, errOut, code := testhub.Run(t, hubBin, nil, "version")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^tend-hub \S+ \(commit `, out)
}
