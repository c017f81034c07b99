package ocisource

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/source"
)

// kept is an unpacked artifact and what its manifest said.
type kept struct {
	Digest  string    `json:"digest"`  // of the manifest
	URL     string    `json:"url"`     // where it was fetched from
	Ref     string    `json:"ref"`     // from the revision annotation, "" for none
	Commit  string    `json:"commit"`  // from the revision annotation
	Created time.Time `json:"created"` // the created annotation
	Source  string    `json:"source,omitempty"`
	Layer   string    `json:"layer,omitempty"` // digest of its one layer; "" when kept by an older tend
	// Ancestors are the commits AnnotationAncestors lists, nearest first.
	Ancestors []string `json:"ancestors,omitempty"`

	dir string // its folder
}

// store is the folder of kept artifacts, laid out as statedir.Artifacts:
// a folder appears under its final name only once complete (unpacked into
// a temp folder, then renamed).
type store struct{ dir string }

func (s store) folder(digest string) string {
	return string(statedir.Artifacts(s.dir).Artifact(digest))
}

// load returns the kept artifact of digest, false when there is none.
func (s store) load(digest string) (*kept, bool) {
	dir := s.folder(digest)
	var k kept
	if ok, err := statedir.ReadJSON(statedir.Artifact(dir).Meta(), &k); !ok || err != nil || k.Digest != digest {
		return nil, false
	}
	k.dir = dir
	return &k, true
}

// all returns every kept artifact.
func (s store) all() []*kept {
	entries, _ := os.ReadDir(s.dir)
	var out []*kept
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), statedir.ArtifactTempPrefix) {
			continue
		}
		if k, ok := s.load(statedir.Digest(e.Name())); ok {
			out = append(out, k)
		}
	}
	return out
}

// byCommit returns the kept artifact of commit (the newest fetched, when
// several were published from it), false when there is none.
func (s store) byCommit(commit string) (*kept, bool) {
	var best *kept
	var bestTime time.Time
	for _, k := range s.all() {
		if k.Commit != strings.ToLower(commit) {
			continue
		}
		fi, err := os.Stat(statedir.Artifact(k.dir).Meta())
		if err != nil {
			continue
		}
		if best == nil || fi.ModTime().After(bestTime) {
			best, bestTime = k, fi.ModTime()
		}
	}
	return best, best != nil
}

// staleTemp is the age past which an unpacking folder is a leftover of a
// tend that died, removed by the next prune.
const staleTemp = time.Hour

// prune removes every kept artifact but those of keep (digests) and of
// the commit applied ("" for none), and what interrupted unpacks left
// (an hour ago or more: a younger one may be in use).
func (s store) prune(applied string, keep ...string) error {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if name == filepath.Base(string(statedir.Dir(s.dir).Blobs())) {
			continue // the layers downloading or waiting to be unpacked
		}
		if strings.HasPrefix(name, statedir.ArtifactTempPrefix) {
			// Another tend (a plan run by hand beside the agent) may be
			// unpacking into it now: only an old one is left over.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) < staleTemp {
				continue
			}
		} else {
			digest := statedir.Digest(name)
			if keepIt(digest, keep) {
				continue
			}
			if k, ok := s.load(digest); ok && applied != "" && k.Commit == strings.ToLower(applied) {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func keepIt(digest string, keep []string) bool {
	for _, k := range keep {
		if k == digest {
			return true
		}
	}
	return false
}

// files reads the manifest files under paths from the kept tree.
func (k *kept) files(paths []source.Path, shown string) ([]source.File, error) {
	root, err := os.OpenRoot(statedir.Artifact(k.dir).Tree())
	if err != nil {
		return nil, fmt.Errorf("open unpacked artifact %s: %w", k.Digest, err)
	}
	defer root.Close()
	return source.DirFiles(root, paths, shown, source.ShortCommit(k.Commit))
}
