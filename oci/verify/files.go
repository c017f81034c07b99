package verify

import (
	"fmt"
	"io"
	"os"
)

// Bounds of the files a verify block names: a public key, a trusted root
// and a trust policy are small, a trust store holds few certificates; a
// path that names something else fails, not the agent.
const (
	MaxKeyFile         = 64 << 10
	MaxTrustedRootFile = 4 << 20
	MaxTrustPolicyFile = 1 << 20
	MaxTrustStoreFiles = 1024
)

// ReadFile reads the file at path, what it is for a message ("cosign
// public key"), of at most max bytes.
func ReadFile(path string, max int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s %s is over %d bytes: is it the right file?", what, path, max)
	}
	return b, nil
}
