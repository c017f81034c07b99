package diff

import (
	"errors"
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// target is a device and where it is at base and at head (nil: not there).
type target struct {
	name       string
	base, head *location
	baseRev    Revision // what base is for this device, even when absent
	headRev    Revision
	branch     bool // found as a device branch, not a folder
	err        error
}

func (t target) path() string {
	if t.head != nil {
		return t.head.Path
	}
	if t.base != nil {
		return t.base.Path
	}
	return ""
}

// discover finds the devices at base and at head. Unless all is set, a
// device whose folder is the same at both is only counted, in the
// Result's Unchanged, and has no target.
func discover(repo *git.Repository, base, head string, opts Options, all bool) ([]target, *Result, error) {
	src, err := parseSources(opts)
	if err != nil {
		return nil, nil, err
	}
	refPat, err := parsePattern("--ref", opts.Ref, false)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case refPat.device:
		return discoverBranches(repo, base, head, src, refPat)
	case src.device.device:
		return discoverPaths(repo, base, head, src, all)
	case src.several():
		return nil, nil, fmt.Errorf("%w: none of the source paths (--path %s) contains {device}; diff finds devices by the folder of each, "+
			"so one must, e.g. --path 'devices/{device}', or put it in --ref for a branch per device; "+
			"finding devices by the metadata.name of their Device documents is not supported yet", ErrNoDevicePlaceholder, src.raw)
	}
	return nil, nil, fmt.Errorf("%w: --path %q names one folder for every device; add {device} where the device's name goes, "+
		"e.g. --path 'devices/{device}', or put it in --ref for a branch per device, e.g. --ref 'devices/{device}'", ErrNoDevicePlaceholder, opts.Path)
}

// discoverPaths finds the devices of path targeting: every folder that
// matches the pattern at base or at head. The two trees are walked
// together, and only as deep as they differ.
//
// A shared path that differs between base and head changes every device:
// each is then rendered at both.
func discoverPaths(repo *git.Repository, base, head string, src sources, all bool) ([]target, *Result, error) {
	bc, err := resolve(repo, base)
	if err != nil {
		return nil, nil, err
	}
	hc, err := resolve(repo, head)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{Base: Revision{base, bc.Hash.String()}, Head: Revision{head, hc.Hash.String()}}
	bShared, err := sharedTrees(repo, bc, src.shared)
	if err != nil {
		return nil, nil, err
	}
	hShared, err := sharedTrees(repo, hc, src.shared)
	if err != nil {
		return nil, nil, err
	}
	if src.apart() {
		res.shared = [2]*location{{Commit: bc.Hash, Rev: base, Shared: bShared}, {Commit: hc.Hash, Rev: head, Shared: hShared}}
	}
	w := newWalker(repo, src.device)
	var changed []pair
	switch {
	case all:
		found, err := w.walk(hc.TreeHash, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range found {
			changed = append(changed, pair{rel: f.rel, device: f.device, base: f.tree, head: f.tree})
		}
	case !sameShared(bShared, hShared):
		if changed, err = w.every(bc.TreeHash, hc.TreeHash); err != nil {
			return nil, nil, err
		}
	default:
		if changed, res.Unchanged, err = w.changes(bc.TreeHash, hc.TreeHash, 0); err != nil {
			return nil, nil, err
		}
	}
	type sides struct{ base, head []pair }
	byName := map[string]*sides{}
	for _, p := range changed {
		s := byName[p.device]
		if s == nil {
			s = &sides{}
			byName[p.device] = s
		}
		if !p.base.IsZero() {
			s.base = append(s.base, p)
		}
		if !p.head.IsZero() {
			s.head = append(s.head, p)
		}
	}
	dups := func(name, rev string, ps []pair) error {
		rels := make([]string, len(ps))
		for i, p := range ps {
			rels[i] = p.rel
		}
		return fmt.Errorf("device %s is in %d folders at %s: %s; a device has one folder", name, len(ps), rev, strings.Join(rels, ", "))
	}
	var targets []target
	for _, name := range sortedNames(byName) {
		s := byName[name]
		t := target{name: name, baseRev: res.Base, headRev: res.Head}
		if len(s.base) > 0 {
			t.base = &location{Commit: bc.Hash, Rev: base, Path: s.base[0].rel, Tree: s.base[0].base, PerDevice: true, Shared: bShared}
		}
		if len(s.head) > 0 {
			t.head = &location{Commit: hc.Hash, Rev: head, Path: s.head[0].rel, Tree: s.head[0].head, PerDevice: true, Shared: hShared}
		}
		switch {
		case len(s.head) > 1:
			t.err = dups(name, head, s.head)
		case len(s.base) > 1 && len(s.head) == 0:
			t.err = dups(name, base, s.base)
		}
		targets = append(targets, t)
	}
	return targets, res, nil
}

// discoverBranches finds the devices of branch targeting. A revision with
// {device} is each device's own ("origin/devices/{device}"); one that
// names a device branch limits the diff to that device (a pull request
// into devices/cam-017); any other is the same commit for every device
// (main, to be merged into every device branch).
func discoverBranches(repo *git.Repository, base, head string, src sources, refPat pattern) ([]target, *Result, error) {
	res := &Result{Base: Revision{Name: base}, Head: Revision{Name: head}}
	commits := map[string]plumbing.Hash{}
	for _, rev := range []string{base, head} {
		if perDevice(rev) {
			continue
		}
		c, err := resolve(repo, rev)
		if err != nil {
			return nil, nil, err
		}
		commits[rev] = c.Hash
	}
	if h, ok := commits[base]; ok {
		res.Base.Commit = h.String()
	}
	if h, ok := commits[head]; ok {
		res.Head.Commit = h.String()
	}
	names, err := branchNames(repo, base, head, refPat)
	if err != nil {
		return nil, nil, err
	}
	b := branchLocator{repo: repo, src: src, commits: commits, walkers: map[string]*walker{}}
	var targets []target
	for _, name := range names {
		t := target{name: name, branch: true}
		var berr, herr error
		t.base, t.baseRev, berr = b.locate(name, base)
		t.head, t.headRev, herr = b.locate(name, head)
		if err := errors.Join(herr, berr); err != nil {
			t.err = fmt.Errorf("device %s: %w", name, err)
		}
		targets = append(targets, t)
	}
	return targets, res, nil
}

// perDevice reports whether a revision names each device's own branch.
func perDevice(rev string) bool { return strings.Contains(rev, devicePlaceholder) }

// branchNames returns the devices a diff of base and head covers: the one
// device branch they name, or every device branch.
func branchNames(repo *git.Repository, base, head string, refPat pattern) ([]string, error) {
	baseDev, baseIsDev := branchDevice(refPat, base)
	headDev, headIsDev := branchDevice(refPat, head)
	switch {
	case !perDevice(base) && !perDevice(head) && baseIsDev:
		return []string{baseDev}, nil
	case !perDevice(base) && !perDevice(head) && headIsDev:
		return []string{headDev}, nil
	case !perDevice(base) && !perDevice(head):
		return nil, fmt.Errorf("%w: with a branch per device (--ref %q), --base or --head must contain {device}, "+
			"e.g. --base 'origin/%s', or name a device branch", ErrNoDevicePlaceholder, refPat.raw, refPat.raw)
	}
	all, err := deviceBranches(repo, refPat)
	if err != nil {
		return nil, err
	}
	return sortedNames(all), nil
}

// branchLocator finds a device's folder at a revision, with a branch per
// device.
type branchLocator struct {
	repo    *git.Repository
	src     sources
	commits map[string]plumbing.Hash // revisions without {device}, resolved once
	walkers map[string]*walker       // by folder
}

// locate finds the folder of device name at rev ({device} expanded); a
// device without a branch there is absent (nil, no error).
func (b branchLocator) locate(name, rev string) (*location, Revision, error) {
	r := Revision{Name: strings.ReplaceAll(rev, devicePlaceholder, name)}
	h, ok := b.commits[rev]
	if !ok {
		c, err := resolve(b.repo, r.Name)
		if errors.Is(err, ErrUnknownRevision) {
			return nil, r, nil // no branch for this device: absent
		}
		if err != nil {
			return nil, r, err
		}
		h = c.Hash
	}
	r.Commit = h.String()
	c, err := b.repo.CommitObject(h)
	if err != nil {
		return nil, r, err
	}
	dir := b.src.device.expand(name)
	w, ok := b.walkers[dir]
	if !ok {
		p, err := parsePattern("--path", dir, true)
		if err != nil {
			return nil, r, err
		}
		w = newWalker(b.repo, p)
		b.walkers[dir] = w
	}
	f, ok, err := w.locate(c)
	if err != nil || !ok {
		return nil, r, err
	}
	shared, err := sharedTrees(b.repo, c, b.src.shared)
	if err != nil {
		return nil, r, err
	}
	return &location{Commit: h, Rev: r.Name, Path: f.rel, Tree: f.tree, PerDevice: b.src.device.device, Shared: shared}, r, nil
}
