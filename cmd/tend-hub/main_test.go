package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testhub"
)

// hubBin is tend-hub, built by TestMain as make build ships it.
var hubBin string

func TestMain(m *testing.M) {
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

// Each command's help lists the flags it uses, and only those.
func TestHelp(t *testing.T) {
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
