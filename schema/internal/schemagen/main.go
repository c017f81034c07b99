// Command schemagen writes the JSON Schema of every kind of document tend
// reads into package schema's folder, from manifest's Go types: `go
// generate ./schema` runs it there. The files are committed and embedded,
// so that tend links no schema generator.
package main

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/tend-dev/tend/schema/internal/gen"
)

func main() {
	// go generate runs in schema's folder, beside manifest's.
	files, err := gen.All("../manifest")
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen (run it as go generate ./schema):", err)
		os.Exit(1)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(name, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "schemagen:", err)
			os.Exit(1)
		}
	}
}
