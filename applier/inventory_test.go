package applier

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
)

func TestInventoryRoundTrip(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	inv := &Inventory{
		Device:      "cam-017",
		Root:        "/srv/node",
		Revision:    "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		AppliedAt:   time.Date(2025, 3, 1, 12, 30, 0, 0, time.FixedZone("CET", 3600)),
		Release:     api.ReleaseKey("model/m@sha256:" + strings.Repeat("ab", 32)),
		Declaration: "sha256:de",
		Resources: map[string]InventoryEntry{
			"file/etc/infer/config.yaml": {Fields: []planner.Field{{Name: "content", Value: "sha256:ab"}, {Name: "mode", Value: "0644"}}, Created: true},
			"file/etc/infer/found":       {Fields: []planner.Field{{Name: "content", Value: "sha256:cd"}, {Name: "mode", Value: "0600"}}},
		},
	}
	require.NoError(t, inv.Save(stateDir))
	require.NoError(t, inv.Save(stateDir), "saving over an existing inventory")

	name := statedir.Dir(stateDir).Inventory()
	require.Equal(t, os.FileMode(0o600), perm(t, name))
	require.Equal(t, statedir.Mode, perm(t, stateDir))
	require.Equal(t, []string{statedir.InventoryFile}, tree(t, stateDir), "no temporary file is left")

	var raw map[string]any
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &raw))
	require.Equal(t, map[string]any{
		"formatVersion": strconv.Itoa(statedir.Format),
		"device":        "cam-017",
		"root":          "/srv/node",
		"revision":      "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		"appliedAt":     "2025-03-01T11:30:00Z",
		"release":       "model/m@sha256:" + strings.Repeat("ab", 32),
		"declaration":   "sha256:de",
		"resources": map[string]any{
			"file/etc/infer/config.yaml": map[string]any{"fields": []any{
				map[string]any{"name": "content", "value": "sha256:ab"},
				map[string]any{"name": "mode", "value": "0644"},
			}, "created": true},
			"file/etc/infer/found": map[string]any{"fields": []any{
				map[string]any{"name": "content", "value": "sha256:cd"},
				map[string]any{"name": "mode", "value": "0600"},
			}},
		},
	}, raw)

	got, err := LoadInventory(stateDir)
	require.NoError(t, err)
	require.True(t, inv.AppliedAt.Equal(got.AppliedAt))
	got.AppliedAt = inv.AppliedAt
	require.Equal(t, inv, got)
	require.Equal(t, map[string][]planner.Field{
		"file/etc/infer/config.yaml": {{Name: "content", Value: "sha256:ab"}, {Name: "mode", Value: "0644"}},
		"file/etc/infer/found":       {{Name: "content", Value: "sha256:cd"}, {Name: "mode", Value: "0600"}},
	}, got.Applied())
	require.Equal(t, map[string]bool{"file/etc/infer/config.yaml": true}, got.Created())
}

func TestLoadInventory(t *testing.T) {
	tests := []struct {
		name    string
		content string // "" for no file
		wantErr string
	}{
		{"missing file is empty", "", ""},
		{"never applied", `{"formatVersion":"1","device":"","revision":"","resources":{}}`, ""},
		{"truncated", `{"formatVersion":"1","reso`, "unexpected end of JSON input"},
		{"not json", "\x00\x00\x00", "invalid character"},
		{"format no number", `{"formatVersion":"two","resources":{}}`, `formatVersion "two" is no format`},
		{"bad time", `{"formatVersion":"1","appliedAt":"yesterday","resources":{}}`, "appliedAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := t.TempDir()
			name := statedir.Dir(stateDir).Inventory()
			if tt.content != "" {
				require.NoError(t, os.WriteFile(name, []byte(tt.content), 0o600))
			}
			inv, err := LoadInventory(stateDir)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Empty(t, inv.Revision)
				require.NotNil(t, inv.Resources)
				require.Empty(t, inv.Applied())
				return
			}
			require.ErrorIs(t, err, ErrCorruptInventory)
			require.ErrorContains(t, err, tt.wantErr)
			require.ErrorContains(t, err, "corrupt inventory "+name+": ")
			require.ErrorContains(t, err, "restore the file from a backup, or move it aside")
		})
	}
}

// An inventory a newer tend wrote is not corrupt: it is refused as newer,
// saying what to install, and left as it is.
func TestLoadInventoryNewerFormat(t *testing.T) {
	stateDir := t.TempDir()
	name := statedir.Dir(stateDir).Inventory()
	content := fmt.Sprintf(`{"formatVersion":"%d","resources":{}}`, statedir.Format+1)
	require.NoError(t, os.WriteFile(name, []byte(content), 0o600))
	_, err := LoadInventory(stateDir)
	var newer *statedir.NewerError
	require.ErrorAs(t, err, &newer)
	require.NotErrorIs(t, err, ErrCorruptInventory)
	require.Equal(t, statedir.Format+1, newer.Format)
	require.ErrorContains(t, err, name+" is in state format "+strconv.Itoa(statedir.Format+1))
	require.ErrorContains(t, err, "install the tend that wrote it")
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, content, string(b))
}
