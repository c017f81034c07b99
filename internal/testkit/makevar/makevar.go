// Package makevar reads a variable of the repository's Makefile, for the
// tests that build tend as make build does (the Makefile's TAGS).
package makevar

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Get is the value of the Makefile's line NAME := VALUE.
func Get(name string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "Makefile")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" := "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s sets no %s", path, name)
}
