package schema

import (
	"embed"
	"fmt"
	"strings"

	"github.com/tend-dev/tend/manifest"
)

//go:generate go run ./internal/schemagen

//go:embed *.json
var files embed.FS

// kinds are the kinds that have a schema, sorted; internal/gen has their
// Go types.
var kinds = []string{manifest.KindAgentConfig, manifest.KindDevice, manifest.KindProfile, manifest.KindRollout}

// Kinds are the kinds that have a schema, sorted.
func Kinds() []string { return append([]string(nil), kinds...) }

// File is the name of kind's schema file in this folder.
func File(kind string) string { return strings.ToLower(kind) + ".json" }

// Get returns the committed schema of kind, named in any case.
func Get(kind string) ([]byte, error) {
	for _, k := range kinds {
		if strings.EqualFold(k, kind) {
			return files.ReadFile(File(k))
		}
	}
	return nil, fmt.Errorf("no schema for kind %q: use one of %s", kind, strings.Join(kinds, ", "))
}
