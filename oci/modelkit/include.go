package modelkit

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/tend-dev/tend/internal/printable"
)

// ErrIncludeMatchesNothing means a pattern of a model's include matches
// no file of its artifact.
var ErrIncludeMatchesNothing = errors.New("matches no file of the model")

// includer selects the paths of a version folder by a model's include:
// globs as path.Match reads them, where "**" stands for any number of
// folders. A path is selected when a pattern matches it or one of the
// folders above it (a pattern naming a folder takes all it holds).
type includer struct{ patterns []string }

// match returns the index of the first pattern that selects p (a slash
// path in the version folder), or -1.
func (in includer) match(p string) int {
	for q := p; q != "." && q != "" && q != "/"; q = path.Dir(q) {
		for i, pat := range in.patterns {
			if ok, _ := doublestar.Match(pat, q); ok {
				return i
			}
		}
	}
	return -1
}

// mayHold reports whether some pattern could select a path inside folder
// dir: a tar layer unpacked there is worth downloading.
func (in includer) mayHold(dir string) bool {
	if in.match(dir) >= 0 {
		return true
	}
	for _, pat := range in.patterns {
		if patternMayHold(pat, dir) {
			return true
		}
	}
	return false
}

// IncludeMayHold reports whether include selects p, a slash path in a
// version folder, or a path inside it (p being a folder).
func IncludeMayHold(include []string, p string) bool {
	return includer{patterns: include}.mayHold(p)
}

// Files returns the paths of a's files (the Kitfile of a ModelKit
// included) and true, when a's entries are files alone; nil and false
// when a holds a tar layer, whose names are known once it is downloaded.
func (a *Artifact) Files() ([]string, bool) {
	var files []string
	for _, e := range a.Entries {
		if e.Unpack {
			return nil, false
		}
		files = append(files, e.Path)
	}
	if a.IsModelKit() {
		files = append(files, KitfileName)
	}
	return files, true
}

// patternMayHold reports whether pat could match a path under dir, by
// matching dir's folders against pat's leading segments. It errs towards
// true: a segment it cannot judge (braces) may match.
func patternMayHold(pat, dir string) bool {
	ps, ds := strings.Split(pat, "/"), strings.Split(dir, "/")
	for i, d := range ds {
		if i >= len(ps) {
			return false
		}
		if ps[i] == "**" || strings.ContainsAny(ps[i], "{}") {
			return true
		}
		if ok, err := path.Match(ps[i], d); err != nil || !ok {
			return false
		}
	}
	return len(ps) > len(ds)
}

// Include returns the version that include selects from a: its file
// entries whose path a pattern matches, and the tar layers that may hold
// such a path (an ORAS folder, or a KitOps or ModelPack layer whose
// declared path, Holds, fits the patterns, and every other layer
// unpacked into the version folder itself, whose names are known only
// once it is downloaded); the store's Materialise unpacks only their
// selected entries. Blobs and Size then count only what the selection
// downloads.
// A ModelKit's Kitfile is one of its files, written only when a pattern
// selects it, as kit unpack --filter leaves it out. An empty include
// returns a itself.
//
// A pattern that matches no file entry, where no kept tar layer could hold
// a match, is an error wrapping ErrIncludeMatchesNothing that names the
// pattern and lists the artifact's files.
func (a *Artifact) Include(include []string) (*Artifact, error) {
	if len(include) == 0 {
		return a, nil
	}
	in := includer{patterns: include}
	hit := make([]bool, len(include))
	out := *a
	out.include = slices.Clone(include)
	out.Entries = nil
	var files []string
	openTar := false
	for _, e := range a.Entries {
		if !e.Unpack {
			files = append(files, e.Path)
			if i := in.match(e.Path); i >= 0 {
				hit[i] = true
				out.Entries = append(out.Entries, e)
			}
			continue
		}
		dir := cmp.Or(e.Path, e.Holds)
		if dir == "" {
			openTar = true
			files = append(files, "(a tar layer's files)")
			out.Entries = append(out.Entries, e)
			continue
		}
		files = append(files, dir+"/…")
		if in.mayHold(dir) {
			out.Entries = append(out.Entries, e)
			for i, pat := range include {
				if (includer{patterns: []string{pat}}).mayHold(dir) {
					hit[i] = true
				}
			}
		}
	}
	if a.IsModelKit() {
		// Written as kit unpack writes it, when a pattern selects it.
		files = append(files, KitfileName)
		if i := in.match(KitfileName); i >= 0 {
			hit[i] = true
		}
	}
	if openTar {
		return &out, nil // a pattern may match inside; Materialise tells
	}
	for i, pat := range include {
		if !hit[i] {
			return nil, includeError(a, pat, files)
		}
	}
	return &out, nil
}

func includeError(a *Artifact, pattern string, files []string) error {
	files = slices.Compact(files)
	return fmt.Errorf("include %q %w %s; it holds %s", pattern, ErrIncludeMatchesNothing, a.Digest, printable.ShortList(files, listedItems))
}

// A Selection tracks what a's include selects while its version folder
// is built: which patterns matched a file, and the files seen. A nil
// Selection, for an artifact with no include, selects everything.
type Selection struct {
	in    includer
	hit   []bool
	files []string
}

// NewSelection returns the selection of a's include (see Include); nil
// when a has none.
func NewSelection(a *Artifact) *Selection {
	if len(a.include) == 0 {
		return nil
	}
	return &Selection{in: includer{patterns: a.include}, hit: make([]bool, len(a.include))}
}

// Saw notes file p of the version folder, which Include kept.
func (s *Selection) Saw(p string) {
	if s == nil {
		return
	}
	s.files = append(s.files, p)
	if i := s.in.match(p); i >= 0 {
		s.hit[i] = true
	}
}

// Takes reports whether the include selects file p (noting it, as Saw
// does): always without one.
func (s *Selection) Takes(p string) bool {
	if s == nil {
		return true
	}
	s.Saw(p)
	return s.in.match(p) >= 0
}

// Keep returns the filter of a tar layer unpacked into folder prefix:
// nil (everything) without an include.
func (s *Selection) Keep(prefix string) func(name string) bool {
	if s == nil {
		return nil
	}
	return func(name string) bool {
		p := path.Join(prefix, name)
		i := s.in.match(p)
		if len(s.files) < 4*listedItems || i >= 0 {
			s.files = append(s.files, p)
		}
		if i >= 0 {
			s.hit[i] = true
		}
		return i >= 0
	}
}

// Check fails when a pattern matched no file: a tar layer held none.
func (s *Selection) Check(a *Artifact) error {
	if s == nil {
		return nil
	}
	for i, pat := range s.in.patterns {
		if !s.hit[i] {
			slices.Sort(s.files)
			return includeError(a, pat, s.files)
		}
	}
	return nil
}
