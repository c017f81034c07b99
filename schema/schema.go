package schema

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// Kinds are the kinds that have a schema, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// File is the name of kind's schema file in this folder.
func File(kind string) string { return strings.ToLower(kind) + ".json" }

// Get returns the committed schema of kind, named in any case.
func Get(kind string) ([]byte, error) {
	for _, k := range Kinds() {
		if strings.EqualFold(k, kind) {
			return files.ReadFile(File(k))
		}
	}
	return nil, fmt.Errorf("no schema for kind %q: use one of %s", kind, strings.Join(Kinds(), ", "))
}
