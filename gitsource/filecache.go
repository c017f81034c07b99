package gitsource

import (
	"fmt"
	"sync"

	"github.com/tend-dev/tend/source"
)

// lastRead keeps the files of the last snapshot read, by clone, commit and
// folders: a commit's tree never changes, so a tick whose target did not
// move reuses them instead of inflating every manifest again from the
// pack (a no-op tick on a fleet repo of 10,000 devices read most of its
// time there). One entry: an agent reads one device's folders.
var lastRead fileCache

type fileCache struct {
	mu   sync.Mutex
	key  string
	kept []source.File
}

// files returns the cached files for the key of dir, rev and dirs, or
// reads them with read and keeps them. The returned files are shared:
// callers do not change them.
func (c *fileCache) files(dir, rev string, dirs []source.Path, read func() ([]source.File, error)) ([]source.File, error) {
	key := fmt.Sprintf("%s\x00%s\x00%v", dir, rev, dirs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == key {
		return c.kept, nil
	}
	files, err := read()
	if err != nil {
		return nil, err
	}
	c.key, c.kept = key, files
	return files, nil
}
