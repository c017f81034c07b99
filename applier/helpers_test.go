package applier

import (
	"io/fs"
	"testing"

	"github.com/tend-dev/tend/internal/testkit/testfs"
)

func tree(t testing.TB, dir string) []string  { return testfs.Tree(t, dir) }
func perm(t testing.TB, p string) fs.FileMode { return testfs.Perm(t, p) }
