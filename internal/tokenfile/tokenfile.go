// Package tokenfile reads a bearer token from the file a flag names, for
// the commands that send or check one (tend fleet, tend-hub).
package tokenfile

import (
	"fmt"
	"os"
	"strings"
)

// Read reads a token from file, named by flag in errors: one word,
// surrounding white space trimmed.
func Read(file, flag string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s %s holds no token (empty, or several words): write one token there", flag, file)
	}
	return tok, nil
}
