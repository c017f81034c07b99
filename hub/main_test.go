package hub

import (
	"os"
	"testing"

	"github.com/tend-dev/tend/internal/testkit/testpg"
)

// TestMain stops the PostgreSQL server the package's tests share (one
// server, a fresh database per test: testpg.Database).
func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }
