package gitsource

import (
	"context"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// listRefs returns the remote's refs as its ref advertisement would, peeled
// tags included. A repository on this machine is read in-process: it is the
// cheap no-op path (no git-upload-pack to start), and the fetch that follows
// a change still goes through the transport.
func listRefs(ctx context.Context, remote *git.Remote, acc access) ([]*plumbing.Reference, error) {
	if urls := remote.Config().URLs; len(urls) == 1 {
		if urlKind(urls[0]) == kindLocal {
			path := strings.TrimPrefix(urls[0], "file://")
			if refs, err := localRefs(path); err == nil {
				return refs, nil
			}
			// Not readable in-process (e.g. a repository format go-git
			// does not know): let the transport say what is wrong.
		}
	}
	return remote.ListContext(ctx, &git.ListOptions{Auth: acc.auth, CABundle: acc.caBundle, ProxyOptions: acc.proxy, PeelingOption: git.AppendPeeled})
}

func localRefs(path string) ([]*plumbing.Reference, error) {
	repo, err := git.PlainOpen(path)
	if err != nil {
		return nil, err
	}
	var refs []*plumbing.Reference
	if head, err := repo.Storer.Reference(plumbing.HEAD); err == nil {
		refs = append(refs, head)
	}
	iter, err := repo.Storer.IterReferences()
	if err != nil {
		return nil, err
	}
	err = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() != plumbing.HashReference || r.Name() == plumbing.HEAD {
			return nil
		}
		refs = append(refs, r)
		if !r.Name().IsTag() {
			return nil
		}
		if tag, err := repo.TagObject(r.Hash()); err == nil {
			if c, err := tag.Commit(); err == nil {
				refs = append(refs, plumbing.NewHashReference(r.Name()+"^{}", c.Hash))
			}
		}
		return nil
	})
	if err == storer.ErrStop {
		err = nil
	}
	return refs, err
}
