package e2e

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSchemaCommand(t *testing.T) {
	out, errOut, code := tend(t, "schema")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "AgentConfig\nDevice\nProfile\nRollout\n", out)

	want, err := os.ReadFile("../../../schema/device.json")
	require.NoError(t, err)
	out, errOut, code = tend(t, "schema", "device")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, string(want), out)

	_, errOut, code = tend(t, "schema", "Fleet")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no schema for kind "Fleet": use one of AgentConfig, Device`)
}
