package diff

import (
	"context"
	"fmt"

	git "github.com/go-git/go-git/v5"
)

// CheckedProfile is a profile of the shared source paths as
// ValidateProfiles found it: valid, and the inventory devices (those with
// a Device document in Git, with their labels in Git) it applies to.
type CheckedProfile struct {
	Name    string // profile/NAME
	File    string
	Line    int
	Devices []string
}

// ValidateProfiles checks every profile of the shared source paths at rev
// once (its name, selector and variable names; its resources are checked
// in every device it applies to, see Validate) and returns, for each, the
// devices of checked it applies to. The error is every problem of the
// shared files, with file and line. With a branch per device (rev with
// {device}) each branch has its own profiles, checked with its device.
func ValidateProfiles(ctx context.Context, repo *git.Repository, rev string, opts Options, checked []Checked) ([]CheckedProfile, error) {
	set, missing, err := readShared(ctx, repo, rev, opts)
	if err != nil || set == nil {
		return nil, err
	}
	if missing != "" {
		return nil, fmt.Errorf("source path %q not found at %s: a path without {device} must exist "+
			"(a misspelt or deleted folder would drop what it holds from every device); fix source.paths or restore the folder", missing, rev)
	}
	shared := set.parsed
	applies := map[string][]string{}
	for _, c := range checked {
		for _, p := range c.Profiles {
			applies[p] = append(applies[p], c.Name)
		}
	}
	var out []CheckedProfile
	for _, p := range shared.Profiles() {
		id := "profile/" + p.Metadata.Name
		out = append(out, CheckedProfile{Name: id, File: p.Origin.File, Line: p.Origin.Line("metadata.name"), Devices: applies[id]})
	}
	return out, shared.Err()
}

// readShared reads the shared source paths at rev once, for the checks of
// tend validate --all. It returns no set with a single source path or a
// branch per device (rev with {device}: each branch has its own), and
// names in missing a shared path not found at rev.
func readShared(ctx context.Context, repo *git.Repository, rev string, opts Options) (set *sharedSet, missing string, err error) {
	src, err := parseSources(opts)
	if err != nil || !src.several() || perDevice(rev) {
		return nil, "", err
	}
	commit, err := resolve(repo, rev)
	if err != nil {
		return nil, "", err
	}
	trees, err := sharedTrees(repo, commit, src.shared)
	if err != nil {
		return nil, "", err
	}
	for _, t := range trees {
		if t.Tree.IsZero() {
			return &sharedSet{}, t.Path, nil
		}
	}
	set, err = newReader(repo).sharedAt(&location{Commit: commit.Hash, Rev: rev, Shared: trees})
	if err != nil {
		return nil, "", err
	}
	return set, "", ctx.Err()
}
