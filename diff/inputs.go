package diff

import (
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/source"
)

// inputs are the manifest files of a device at one revision: its own
// folder's, and the shared source paths', parsed once for every device
// that reads the same shared trees.
type inputs struct {
	own    []manifest.Input
	shared *sharedSet // nil: no shared paths, or own holds every file
}

func (in *inputs) empty() bool { return in == nil || len(in.own) == 0 }

// sharedSet is the shared source paths at one revision, parsed once.
type sharedSet struct {
	key    string // the shared trees, by path and hash
	parsed *manifest.Shared
}

// reader reads devices' inputs, each distinct set of shared trees once.
type reader struct {
	repo   *git.Repository
	shared map[string]*sharedSet
	// last is the device folder read last: a folder that is the same at
	// base and head (a change of the shared paths only) is read once.
	last      plumbing.Hash
	lastPath  string
	lastFiles []source.File
}

func newReader(repo *git.Repository) *reader {
	return &reader{repo: repo, shared: map[string]*sharedSet{}}
}

// read returns the manifest files of a device's folder at one revision,
// with those of the shared source paths, named by their path in the repo;
// nil when the folder holds none (not a device). Symlinks and submodules
// are skipped, as gitsource skips them, and a shared path that is not in
// the commit is the agent's error.
func (r *reader) read(loc *location) (*inputs, error) {
	if loc == nil {
		return nil, nil
	}
	files, err := r.own(loc)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	in := &inputs{own: make([]manifest.Input, len(files))}
	for i, f := range files {
		in.own[i] = manifest.Input{Name: f.Path, Data: f.Data, PerDevice: true}
	}
	if len(loc.Shared) == 0 {
		return in, nil
	}
	if !loc.sharedApart() {
		return r.readTogether(loc)
	}
	in.shared, err = r.sharedAt(loc)
	return in, err
}

// own returns the files of the device's folder.
func (r *reader) own(loc *location) ([]source.File, error) {
	if loc.Tree == r.last && loc.Path == r.lastPath && !r.last.IsZero() {
		return r.lastFiles, nil
	}
	tree, err := object.GetTree(r.repo.Storer, loc.Tree)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s at %s: %w", displayPath(loc.Path), loc.Rev, err)
	}
	files, err := gitsource.TreeFiles(tree, loc.Path)
	if err != nil {
		return nil, fmt.Errorf("read files under %s at %s: %w", displayPath(loc.Path), loc.Rev, err)
	}
	r.last, r.lastPath, r.lastFiles = loc.Tree, loc.Path, files
	return files, nil
}

// readTogether reads a device's folder and the shared paths in one, as
// the agent does: when a shared path is missing (the agent's error, which
// gitsource words) or overlaps the device's folder.
func (r *reader) readTogether(loc *location) (*inputs, error) {
	commit, err := r.repo.CommitObject(loc.Commit)
	if err != nil {
		return nil, fmt.Errorf("read commit %s (%s): %w", loc.Commit, loc.Rev, err)
	}
	paths := []source.Path{{Dir: loc.Path, PerDevice: true}}
	for _, s := range loc.Shared {
		paths = append(paths, source.Path{Dir: s.Path})
	}
	files, err := gitsource.CommitFiles(commit, paths, loc.Rev)
	if err != nil {
		return nil, err
	}
	in := &inputs{own: make([]manifest.Input, len(files))}
	for i, f := range files {
		in.own[i] = manifest.Input{Name: f.Path, Data: f.Data, PerDevice: f.PerDevice}
	}
	return in, nil
}

// sharedAt returns the shared paths of loc, parsed, reading them the first
// time these trees are asked for.
func (r *reader) sharedAt(loc *location) (*sharedSet, error) {
	var key strings.Builder
	for _, s := range loc.Shared {
		fmt.Fprintf(&key, "%s\x00%s\x00", s.Path, s.Tree)
	}
	if s, ok := r.shared[key.String()]; ok {
		return s, nil
	}
	var all []manifest.Input
	for _, s := range loc.Shared {
		tree, err := object.GetTree(r.repo.Storer, s.Tree)
		if err != nil {
			return nil, fmt.Errorf("read tree of %s at %s: %w", displayPath(s.Path), loc.Rev, err)
		}
		files, err := gitsource.TreeFiles(tree, s.Path)
		if err != nil {
			return nil, fmt.Errorf("read files under %s at %s: %w", displayPath(s.Path), loc.Rev, err)
		}
		for _, f := range files {
			all = append(all, manifest.Input{Name: f.Path, Data: f.Data})
		}
	}
	s := &sharedSet{key: key.String(), parsed: manifest.ParseShared(all)}
	r.shared[s.key] = s
	return s, nil
}

// sharedApart reports whether the shared paths can be read apart from the
// device's folder: every one is in the commit, and none holds another or
// the device's folder.
func (l *location) sharedApart() bool {
	dirs := []string{l.Path}
	for _, s := range l.Shared {
		if s.Tree.IsZero() {
			return false
		}
		dirs = append(dirs, s.Path)
	}
	for i, a := range dirs {
		for j, b := range dirs {
			if i != j && within(a, b) {
				return false
			}
		}
	}
	return true
}

// sharedPresent reports whether every shared path is in the commit.
func (l *location) sharedPresent() bool {
	for _, s := range l.Shared {
		if s.Tree.IsZero() {
			return false
		}
	}
	return len(l.Shared) > 0
}

// within reports whether folder a is b or under it ("" is the root).
func within(a, b string) bool {
	return b == "" || a == b || strings.HasPrefix(a, b+"/")
}
