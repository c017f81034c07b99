package diff

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// location is where a device's manifests are at one revision: a folder of
// a commit's tree, known by the hash of its tree. Two locations with the
// same hash hold the same files, whatever their paths.
type location struct {
	Commit plumbing.Hash // the commit read
	Rev    string        // the revision as named, for messages and plans
	Path   string        // repo-relative folder, "" for the root
	Tree   plumbing.Hash
	// PerDevice is set when Path came from a pattern with {device}.
	PerDevice bool
	// Shared are the shared source paths at Commit, read with Path.
	Shared []sharedPath
}

// sharedPath is a source path without {device} at one commit.
type sharedPath struct {
	Path string        // repo-relative folder, "" for the root
	Tree plumbing.Hash // zero: not in the commit
}

// same reports whether two locations hold the same files: the same
// folder tree and the same shared trees.
func (l *location) same(o *location) bool {
	if l.Tree != o.Tree || len(l.Shared) != len(o.Shared) {
		return false
	}
	for i := range l.Shared {
		if l.Shared[i] != o.Shared[i] {
			return false
		}
	}
	return true
}

// sharedTrees returns the shared paths at commit.
func sharedTrees(repo *git.Repository, commit *object.Commit, shared []string) ([]sharedPath, error) {
	if len(shared) == 0 {
		return nil, nil
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
	}
	out := make([]sharedPath, len(shared))
	for i, p := range shared {
		out[i].Path = p
		if p == "" {
			out[i].Tree = root.Hash
			continue
		}
		e, err := root.FindEntry(p)
		if err == nil && e.Mode == filemode.Dir {
			out[i].Tree = e.Hash
		}
	}
	return out, nil
}

// sameShared reports whether the shared paths are the same at both.
func sameShared(a, b []sharedPath) bool {
	return (&location{Shared: a}).same(&location{Shared: b})
}

// found is one folder that matches a path pattern.
type found struct {
	rel    string // path below the tree walked
	device string // "" when the segments walked hold no {device}
	tree   plumbing.Hash
}

// walker finds the folders of a tree that match a path pattern. It
// remembers what it found in each subtree by hash, so a subtree that is
// the same at two revisions is walked once.
type walker struct {
	repo   *git.Repository
	segs   []segment
	memo   map[memoKey][]found
	counts map[memoKey]int
}

type memoKey struct {
	tree plumbing.Hash
	seg  int
}

func newWalker(repo *git.Repository, p pattern) *walker {
	return &walker{repo: repo, segs: p.segs, memo: map[memoKey][]found{}, counts: map[memoKey]int{}}
}

// walk returns the folders below tree that match segments i and after.
func (w *walker) walk(tree plumbing.Hash, i int) ([]found, error) {
	key := memoKey{tree, i}
	if out, ok := w.memo[key]; ok {
		return out, nil
	}
	if i == len(w.segs) {
		return []found{{tree: tree}}, nil
	}
	t, err := w.tree(tree)
	if err != nil {
		return nil, err
	}
	seg := w.segs[i]
	var out []found
	for _, e := range t.Entries {
		if e.Mode != filemode.Dir {
			continue
		}
		device, ok := seg.match(e.Name)
		if !ok {
			continue
		}
		below, err := w.walk(e.Hash, i+1)
		if err != nil {
			return nil, err
		}
		for _, f := range below {
			if device != "" {
				f.device = device
			}
			f.rel = path.Join(e.Name, f.rel)
			out = append(out, f)
		}
	}
	w.memo[key] = out
	return out, nil
}

func (w *walker) tree(h plumbing.Hash) (*object.Tree, error) {
	t, err := object.GetTree(w.repo.Storer, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	return t, nil
}

// count returns how many folders below tree match segments i and after,
// without collecting them.
func (w *walker) count(tree plumbing.Hash, i int) (int, error) {
	if i == len(w.segs) {
		return 1, nil
	}
	key := memoKey{tree, i}
	if n, ok := w.counts[key]; ok {
		return n, nil
	}
	t, err := w.tree(tree)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range t.Entries {
		if e.Mode != filemode.Dir {
			continue
		}
		if _, ok := w.segs[i].match(e.Name); !ok {
			continue
		}
		below, err := w.count(e.Hash, i+1)
		if err != nil {
			return 0, err
		}
		n += below
	}
	w.counts[key] = n
	return n, nil
}

// pair is a folder that matches the pattern at base or at head (a zero
// hash: not there) and differs between them.
type pair struct {
	rel        string
	device     string
	base, head plumbing.Hash
}

// changes walks the trees base and head (a zero hash: not there) together
// from segment i and returns the matching folders that differ, and how
// many are the same at both. A subtree with the same hash at both is only
// counted: its devices are not looked at.
func (w *walker) changes(base, head plumbing.Hash, i int) (changed []pair, same int, err error) {
	if base == head {
		n, err := w.count(base, i)
		return nil, n, err
	}
	if i == len(w.segs) {
		return []pair{{base: base, head: head}}, 0, nil
	}
	var bEntries, hEntries []object.TreeEntry
	for _, side := range []struct {
		h   plumbing.Hash
		out *[]object.TreeEntry
	}{{base, &bEntries}, {head, &hEntries}} {
		if side.h.IsZero() {
			continue
		}
		t, err := w.tree(side.h)
		if err != nil {
			return nil, 0, err
		}
		*side.out = t.Entries
	}
	seg := w.segs[i]
	visit := func(name string, b, h plumbing.Hash) error {
		device, ok := seg.match(name)
		if !ok {
			return nil
		}
		below, n, err := w.changes(b, h, i+1)
		if err != nil {
			return err
		}
		same += n
		for _, p := range below {
			if device != "" {
				p.device = device
			}
			p.rel = path.Join(name, p.rel)
			changed = append(changed, p)
		}
		return nil
	}
	// Tree entries are sorted (a folder as if its name ended in "/"):
	// merge the two lists.
	bi, hi := 0, 0
	for bi < len(bEntries) || hi < len(hEntries) {
		if bi < len(bEntries) && bEntries[bi].Mode != filemode.Dir {
			bi++
			continue
		}
		if hi < len(hEntries) && hEntries[hi].Mode != filemode.Dir {
			hi++
			continue
		}
		var c int
		switch {
		case bi == len(bEntries):
			c = 1
		case hi == len(hEntries):
			c = -1
		default:
			c = compareDirs(bEntries[bi].Name, hEntries[hi].Name)
		}
		var err error
		switch {
		case c < 0:
			err = visit(bEntries[bi].Name, bEntries[bi].Hash, plumbing.ZeroHash)
			bi++
		case c > 0:
			err = visit(hEntries[hi].Name, plumbing.ZeroHash, hEntries[hi].Hash)
			hi++
		default:
			err = visit(bEntries[bi].Name, bEntries[bi].Hash, hEntries[hi].Hash)
			bi, hi = bi+1, hi+1
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return changed, same, nil
}

// every returns every folder that matches the pattern at base or at
// head (a zero hash: not there), whether it differs or not: a change
// outside the folders (a shared source path) reaches them all.
func (w *walker) every(base, head plumbing.Hash) ([]pair, error) {
	byRel := map[string]*pair{}
	var out []*pair
	for _, side := range []struct {
		tree   plumbing.Hash
		isHead bool
	}{{base, false}, {head, true}} {
		if side.tree.IsZero() {
			continue
		}
		found, err := w.walk(side.tree, 0)
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			p := byRel[f.rel]
			if p == nil {
				p = &pair{rel: f.rel, device: f.device}
				byRel[f.rel] = p
				out = append(out, p)
			}
			if side.isHead {
				p.head = f.tree
			} else {
				p.base = f.tree
			}
		}
	}
	pairs := make([]pair, len(out))
	for i, p := range out {
		pairs[i] = *p
	}
	return pairs, nil
}

// compareDirs orders folder names as Git sorts tree entries: as if each
// ended in "/".
func compareDirs(a, b string) int {
	for i := 0; ; i++ {
		ca, cb := byte('/'), byte('/')
		if i < len(a) {
			ca = a[i]
		}
		if i < len(b) {
			cb = b[i]
		}
		switch {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		case i >= len(a) && i >= len(b):
			return 0
		}
	}
}

// locate returns the folder of commit that matches the path pattern p,
// whose placeholders other than {device} are wildcards. ok is false when
// there is none.
func (w *walker) locate(commit *object.Commit) (f found, ok bool, err error) {
	all, err := w.walk(commit.TreeHash, 0)
	if err != nil || len(all) == 0 {
		return found{}, false, err
	}
	if len(all) > 1 {
		rels := make([]string, len(all))
		for i, f := range all {
			rels[i] = f.rel
		}
		return found{}, false, fmt.Errorf("path matches %d folders (%s); a device has one", len(all), strings.Join(rels, ", "))
	}
	return all[0], true, nil
}

// branches returns the branches of repo by short name: local branches
// (refs/heads/NAME) and remote-tracking ones (refs/remotes/REMOTE/NAME),
// a local branch first. A CI checkout often has only the remote ones.
func branches(repo *git.Repository) (map[string]*plumbing.Reference, error) {
	iter, err := repo.References()
	if err != nil {
		return nil, err
	}
	out := map[string]*plumbing.Reference{}
	rank := func(r *plumbing.Reference) int {
		switch {
		case r.Name().IsBranch():
			return 0
		case strings.HasPrefix(r.Name().String(), "refs/remotes/origin/"):
			return 1
		}
		return 2
	}
	err = iter.ForEach(func(r *plumbing.Reference) error {
		name := r.Name().String()
		short, ok := strings.CutPrefix(name, "refs/heads/")
		if !ok {
			rest, remote := strings.CutPrefix(name, "refs/remotes/")
			if !remote {
				return nil
			}
			if _, short, ok = strings.Cut(rest, "/"); !ok || short == "HEAD" {
				return nil
			}
		}
		prev, seen := out[short]
		if !seen || rank(r) < rank(prev) || rank(r) == rank(prev) && name < prev.Name().String() {
			out[short] = r
		}
		return nil
	})
	return out, err
}

// deviceBranches returns the devices of a ref pattern with {device}, by
// name, and the full name of the branch of each.
func deviceBranches(repo *git.Repository, p pattern) (map[string]string, error) {
	all, err := branches(repo)
	if err != nil {
		return nil, fmt.Errorf("list branches: %w", err)
	}
	out := map[string]string{}
	for short, r := range all {
		if device, ok := p.matchRef(short); ok {
			out[device] = r.Name().String()
		}
	}
	return out, nil
}

// branchDevice returns the device whose branch rev names, when rev is one
// of the branches of a ref pattern ("devices/cam-017",
// "origin/devices/cam-017", "refs/heads/devices/cam-017").
func branchDevice(p pattern, rev string) (string, bool) {
	candidates := []string{rev}
	if s, ok := strings.CutPrefix(rev, "refs/heads/"); ok {
		candidates = []string{s}
	} else if s, ok := strings.CutPrefix(rev, "refs/remotes/"); ok {
		if _, s, ok = strings.Cut(s, "/"); ok {
			candidates = []string{s}
		}
	} else if _, s, ok := strings.Cut(rev, "/"); ok {
		candidates = append(candidates, s) // origin/devices/cam-017
	}
	for _, c := range candidates {
		if d, ok := p.matchRef(c); ok {
			return d, true
		}
	}
	return "", false
}

// resolve returns the commit rev names: anything git rev-parse takes that
// go-git knows (branch, tag, full or abbreviated hash, origin/main,
// HEAD~1), and a branch that exists only as a remote-tracking branch of
// origin (a bare mirror of a URL, a CI checkout).
func resolve(repo *git.Repository, rev string) (*object.Commit, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil && !strings.HasPrefix(rev, "refs/") {
		if h2, err2 := repo.ResolveRevision(plumbing.Revision("refs/remotes/origin/" + rev)); err2 == nil {
			h, err = h2, nil
		}
	}
	if err != nil {
		if errors.Is(err, plumbing.ErrReferenceNotFound) || errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w %q: no branch, tag or commit of that name in the repository "+
				"(a shallow CI checkout needs fetch-depth: 0, and a branch of another remote its remote name, e.g. origin/main)", ErrUnknownRevision, rev)
		}
		return nil, fmt.Errorf("%w %q: %v", ErrUnknownRevision, rev, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s (%s): %w", h, rev, err)
	}
	return c, nil
}

// sortedNames returns the keys of the maps, sorted, each once.
func sortedNames[V any](maps ...map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
