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
	pathPat, err := parsePattern("--path", opts.Path, true)
	if err != nil {
		return nil, nil, err
	}
	refPat, err := parsePattern("--ref", opts.Ref, false)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case refPat.device:
		return discoverBranches(repo, base, head, pathPat, refPat)
	case pathPat.device:
		return discoverPaths(repo, base, head, pathPat, all)
	}
	return nil, nil, fmt.Errorf("%w: --path %q names one folder for every device; add {device} where the device's name goes, "+
		"e.g. --path 'devices/{device}', or put it in --ref for a branch per device, e.g. --ref 'devices/{device}'", ErrNoDevicePlaceholder, opts.Path)
}

// discoverPaths finds the devices of path targeting: every folder that
// matches the pattern at base or at head. The two trees are walked
// together, and only as deep as they differ.
func discoverPaths(repo *git.Repository, base, head string, p pattern, all bool) ([]target, *Result, error) {
	bc, err := resolve(repo, base)
	if err != nil {
		return nil, nil, err
	}
	hc, err := resolve(repo, head)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{Base: Revision{base, bc.Hash.String()}, Head: Revision{head, hc.Hash.String()}}
	w := newWalker(repo, p)
	var changed []pair
	if all {
		found, err := w.walk(hc.TreeHash, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range found {
			changed = append(changed, pair{rel: f.rel, device: f.device, base: f.tree, head: f.tree})
		}
	} else if changed, res.Unchanged, err = w.changes(bc.TreeHash, hc.TreeHash, 0); err != nil {
		return nil, nil, err
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
			t.base = &location{Commit: bc.Hash, Rev: base, Path: s.base[0].rel, Tree: s.base[0].base}
		}
		if len(s.head) > 0 {
			t.head = &location{Commit: hc.Hash, Rev: head, Path: s.head[0].rel, Tree: s.head[0].head}
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
func discoverBranches(repo *git.Repository, base, head string, pathPat, refPat pattern) ([]target, *Result, error) {
	res := &Result{Base: Revision{Name: base}, Head: Revision{Name: head}}
	perDevice := func(rev string) bool { return strings.Contains(rev, devicePlaceholder) }
	fixed := map[string]*Revision{}
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
		fixed[rev] = &Revision{rev, c.Hash.String()}
	}
	if r := fixed[base]; r != nil {
		res.Base = *r
	}
	if r := fixed[head]; r != nil {
		res.Head = *r
	}

	var names []string
	baseDev, baseIsDev := branchDevice(refPat, base)
	headDev, headIsDev := branchDevice(refPat, head)
	switch {
	case !perDevice(base) && !perDevice(head) && baseIsDev:
		names = []string{baseDev}
	case !perDevice(base) && !perDevice(head) && headIsDev:
		names = []string{headDev}
	case !perDevice(base) && !perDevice(head):
		return nil, nil, fmt.Errorf("%w: with a branch per device (--ref %q), --base or --head must contain {device}, "+
			"e.g. --base 'origin/%s', or name a device branch", ErrNoDevicePlaceholder, refPat.raw, refPat.raw)
	default:
		all, err := deviceBranches(repo, refPat)
		if err != nil {
			return nil, nil, err
		}
		names = sortedNames(all)
	}

	walkers := map[string]*walker{}
	locate := func(name, rev string) (*location, Revision, error) {
		r := Revision{Name: strings.ReplaceAll(rev, devicePlaceholder, name)}
		h, ok := commits[rev]
		if !ok {
			c, err := resolve(repo, r.Name)
			if errors.Is(err, ErrUnknownRevision) {
				return nil, r, nil // no branch for this device: absent
			}
			if err != nil {
				return nil, r, err
			}
			h = c.Hash
		}
		r.Commit = h.String()
		c, err := repo.CommitObject(h)
		if err != nil {
			return nil, r, err
		}
		dir := pathPat.expand(name)
		w, ok := walkers[dir]
		if !ok {
			p, err := parsePattern("--path", dir, true)
			if err != nil {
				return nil, r, err
			}
			w = newWalker(repo, p)
			walkers[dir] = w
		}
		f, ok, err := w.locate(c)
		if err != nil || !ok {
			return nil, r, err
		}
		return &location{Commit: h, Rev: r.Name, Path: f.rel, Tree: f.tree}, r, nil
	}
	var targets []target
	for _, name := range names {
		t := target{name: name}
		var berr, herr error
		t.base, t.baseRev, berr = locate(name, base)
		t.head, t.headRev, herr = locate(name, head)
		if err := errors.Join(herr, berr); err != nil {
			t.err = fmt.Errorf("device %s: %w", name, err)
		}
		targets = append(targets, t)
	}
	return targets, res, nil
}
