package gitsource

import (
	"encoding/hex"
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/tend-dev/tend/internal/errkind"
)

// target is a configured ref resolved against the remote's advertised refs.
type target struct {
	hash    plumbing.Hash  // the advertised commit (peeled) or tag object
	refspec config.RefSpec // fetches just this ref
	prefix  string         // set instead of hash for a commit no ref names
}

// fetchAll is what is fetched for a commit that no advertised ref names.
var fetchAll = []config.RefSpec{
	"+refs/heads/*:refs/remotes/origin/*",
	"+refs/tags/*:refs/tags/*",
}

// resolveRemote resolves ref against the remote's advertised refs: the
// remote HEAD when ref is empty, else a full ref name, a branch, a tag
// (peeled to its commit when the remote says what it points to), and last a
// commit hash, full or abbreviated.
func resolveRemote(refs []*plumbing.Reference, ref, shown string) (target, error) {
	byName := make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs))
	for _, r := range refs {
		byName[r.Name()] = r
	}
	hashOf := func(name plumbing.ReferenceName) (plumbing.Hash, bool) {
		if p, ok := byName[name+"^{}"]; ok {
			return p.Hash(), true
		}
		r, ok := byName[name]
		if !ok || r.Type() != plumbing.HashReference {
			return plumbing.ZeroHash, false
		}
		return r.Hash(), true
	}

	if ref == "" {
		head, ok := byName[plumbing.HEAD]
		if !ok {
			return target{}, notFound(ErrRefNotFound, "remote HEAD of %s not found (is the repository empty?)", shown)
		}
		if head.Type() == plumbing.HashReference {
			return checked(target{hash: head.Hash(), refspec: "+HEAD:refs/remotes/origin/HEAD"}, plumbing.HEAD, shown)
		}
		ref = head.Target().String()
	}

	var candidates []candidate
	if strings.HasPrefix(ref, "refs/") {
		candidates = []candidate{{plumbing.ReferenceName(ref), localRef(ref)}}
	} else {
		candidates = []candidate{
			{plumbing.NewBranchReferenceName(ref), "refs/remotes/origin/" + ref},
			{plumbing.NewTagReferenceName(ref), "refs/tags/" + ref},
		}
	}
	for _, c := range candidates {
		if h, ok := hashOf(c.name); ok {
			return checked(target{hash: h, refspec: config.RefSpec("+" + c.name.String() + ":" + c.dst)}, c.name, shown)
		}
	}

	if looksLikeHash(ref) {
		return target{prefix: strings.ToLower(ref)}, nil
	}
	return target{}, notFound(ErrRefNotFound, "ref %q not found in %s (tried branch and tag)", ref, shown)
}

// checked refuses a ref the remote advertises at the all-zero id, which
// names no object: the remote's error, not the clone's, and not a ref to
// fetch.
func checked(t target, name plumbing.ReferenceName, shown string) (target, error) {
	if t.hash.IsZero() {
		return target{}, errkind.New(errRemote, "%s advertises %s at the all-zero id, which names no commit: the server is broken; "+
			"the node stays at its last applied commit", shown, name)
	}
	return t, nil
}

// candidate is a remote ref name ref may stand for, and where it is stored in
// the clone.
type candidate struct {
	name plumbing.ReferenceName
	dst  string
}

// localRef is where a remote ref given by full name is stored in the clone.
func localRef(name string) string {
	if b, ok := strings.CutPrefix(name, "refs/heads/"); ok {
		return "refs/remotes/origin/" + b
	}
	return name
}

// looksLikeHash reports whether s can be a full or abbreviated commit hash.
func looksLikeHash(s string) bool {
	if len(s) < 4 || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// peelToCommit returns the commit hash names: the commit itself, or the
// commit an annotated tag (or a chain of them) points to.
func peelToCommit(repo *git.Repository, hash plumbing.Hash) (plumbing.Hash, error) {
	if _, err := repo.CommitObject(hash); err == nil {
		return hash, nil
	}
	tag, err := repo.TagObject(hash)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c, err := tag.Commit()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("tag %s: %w", tag.Name, err)
	}
	return c.Hash, nil
}

// hashPrefixer is implemented by go-git's filesystem object storage; it
// scans loose objects and pack indexes without reading objects.
type hashPrefixer interface {
	HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error)
}

// localCommit finds the one commit in the clone whose hash starts with
// prefix (lowercase hex, 4 to 40 digits). ok is false when there is none.
func localCommit(repo *git.Repository, prefix string) (h plumbing.Hash, ok bool, err error) {
	if len(prefix) == 40 {
		h = plumbing.NewHash(prefix)
		_, err := repo.CommitObject(h)
		return h, err == nil, nil
	}
	st, isPrefixer := repo.Storer.(hashPrefixer)
	if !isPrefixer {
		return plumbing.ZeroHash, false, fmt.Errorf("clone storage cannot resolve abbreviated hashes")
	}
	even, err := hex.DecodeString(prefix[:len(prefix)&^1])
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	hashes, err := st.HashesWithPrefix(even)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	var found []plumbing.Hash
	for _, c := range hashes {
		if !strings.HasPrefix(c.String(), prefix) {
			continue
		}
		if _, err := repo.CommitObject(c); err == nil {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return plumbing.ZeroHash, false, nil
	case 1:
		return found[0], true, nil
	default:
		return plumbing.ZeroHash, false, fmt.Errorf("abbreviated commit %q is ambiguous (%d commits match); use more digits", prefix, len(found))
	}
}
