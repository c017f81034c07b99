package ocisource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/source"
)

// PublishOptions configure Publish.
type PublishOptions struct {
	// Ref names the revision (REF@sha1:COMMIT); "" means the branch or tag
	// rev names, the branch HEAD is on, else HEAD.
	Ref      string
	Registry transport.Options
}

// Published is what Publish pushed.
type Published struct {
	Ref      string // the artifact, host/repo:tag
	Digest   string // of the manifest, sha256:…
	Revision string // REF@sha1:COMMIT
	Created  string // the commit's committer time, RFC 3339
	Source   string // the repo's origin URL without credentials, "" for none
	Size     int64  // of the layer
	// Unpacked is what the layer costs a device's unpack budget: its
	// files' bytes and extract.EntryCost for each file and folder.
	Unpacked int64
}

// Publish pushes the tree of the commit rev names in repo to target
// (oci://HOST/REPO:TAG) as a fleet artifact in Flux's format. The same
// commit gives the same layer from any clone (see Build), and the same
// digest from any clone that holds its last MaxAncestors ancestors.
func Publish(ctx context.Context, repo *git.Repository, rev, target string, opts PublishOptions) (*Published, error) {
	raw, ok := strings.CutPrefix(target, Scheme)
	if !ok {
		return nil, fmt.Errorf("publish to %q: not an oci:// URL; use oci://HOST/REPO:TAG", target)
	}
	ref, err := name.NewTag(raw, append(opts.Registry.NameOptions(raw), name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("publish to %q: %w; use oci://HOST/REPO:TAG", target, err)
	}
	img, pub, err := Build(repo, rev, opts.Ref)
	if err != nil {
		return nil, err
	}
	if err := remote.Write(ref, img, limitRedirects(opts.Registry).RemoteOptions(ctx)...); err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	pub.Ref, pub.Digest = ref.String(), d.String()
	return pub, nil
}

// Build makes the fleet artifact of the commit rev names: a config of
// ConfigMediaType, one layer of ContentMediaType holding the commit's tree
// (regular files and their folders; symlinks and submodules are left out,
// as a device never reads them), and the source, revision and created
// annotations. It is reproducible: entries sorted by name, mtime 0, owner
// 0:0 with no names, modes 0644, 0755 for executables and folders, a gzip
// header with no name and no time, and created taken from the commit.
// It also carries the commit's ancestors (AnnotationAncestors), as far as
// the clone holds them: a shallow clone lists fewer, which changes the
// digest but not the layer.
func Build(repo *git.Repository, rev, refName string) (v1.Image, *Published, error) {
	commit, named, err := resolve(repo, rev)
	if err != nil {
		return nil, nil, err
	}
	if refName == "" {
		refName = named
	}
	layerData, unpacked, err := tarTree(commit)
	if err != nil {
		return nil, nil, err
	}
	pub := &Published{
		Revision: source.Revision{Ref: refName, Commit: commit.Hash.String()}.String(),
		Created:  commit.Committer.When.UTC().Format(time.RFC3339),
		Source:   originURL(repo),
		Size:     int64(len(layerData)),
		Unpacked: unpacked,
	}
	ann := map[string]string{AnnotationRevision: pub.Revision, AnnotationCreated: pub.Created}
	if pub.Source != "" {
		ann[AnnotationSource] = pub.Source
	}
	if a := ancestors(repo, commit); len(a) > 0 {
		ann[AnnotationAncestors] = strings.Join(a, ",")
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithMediaType(ContentMediaType))
	if err != nil {
		return nil, nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf.Created = v1.Time{Time: commit.Committer.When.UTC().Truncate(time.Second)}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, nil, err
	}
	img = mutate.Annotations(img, ann).(v1.Image)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer}); err != nil {
		return nil, nil, err
	}
	return img, pub, nil
}

// ancestors lists the commits before c for AnnotationAncestors, nearest
// first: each commit of its first-parent chain with its other parents, at
// most MaxAncestors, stopping where the clone has no more history (a
// shallow checkout).
func ancestors(repo *git.Repository, c *object.Commit) []string {
	var out []string
	seen := map[plumbing.Hash]bool{}
	for len(out) < MaxAncestors && len(c.ParentHashes) > 0 {
		for _, p := range c.ParentHashes {
			if !seen[p] && len(out) < MaxAncestors {
				seen[p] = true
				out = append(out, p.String())
			}
		}
		next, err := repo.CommitObject(c.ParentHashes[0])
		if err != nil {
			break
		}
		c = next
	}
	return out
}

// resolve returns the commit rev names and the name of the branch or tag
// it names ("HEAD" when it names none: a hash, a detached HEAD).
func resolve(repo *git.Repository, rev string) (*object.Commit, string, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil && !strings.HasPrefix(rev, "refs/") {
		if h2, err2 := repo.ResolveRevision(plumbing.Revision("refs/remotes/origin/" + rev)); err2 == nil {
			h, err = h2, nil
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("revision %q: %w: no branch, tag or commit of that name in the repository "+
			"(a shallow CI checkout needs the commit fetched)", rev, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, "", fmt.Errorf("read commit %s (%s): %w", h, rev, err)
	}
	return c, refName(repo, rev), nil
}

// refName is the short name of the branch or tag rev names, "HEAD" for
// anything else.
func refName(repo *git.Repository, rev string) string {
	if rev == "HEAD" {
		if head, err := repo.Reference(plumbing.HEAD, false); err == nil && head.Type() == plumbing.SymbolicReference {
			return head.Target().Short()
		}
		return "HEAD"
	}
	short := rev
	for _, p := range []string{"refs/heads/", "refs/tags/", "refs/remotes/origin/", "origin/"} {
		short = strings.TrimPrefix(short, p)
	}
	for _, full := range []string{"refs/heads/" + short, "refs/tags/" + short, "refs/remotes/origin/" + short} {
		if _, err := repo.Reference(plumbing.ReferenceName(full), false); err == nil {
			return short
		}
	}
	return "HEAD"
}

// originURL is the URL of the remote origin without credentials, "" when
// there is none.
func originURL(repo *git.Repository) string {
	r, err := repo.Remote("origin")
	if err != nil || len(r.Config().URLs) == 0 {
		return ""
	}
	return source.RedactURL(r.Config().URLs[0])
}

// tarTree writes the commit's tree as a reproducible tar.gz (see Build),
// and returns what it costs a device to unpack. It refuses, before
// reading a file, a tree that unpacks to more than MaxUnpackedBytes, and
// a layer over MaxLayerBytes, the bounds every device enforces.
func tarTree(commit *object.Commit) ([]byte, int64, error) {
	tree, err := commit.Tree()
	if err != nil {
		return nil, 0, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
	}
	type entry struct {
		name string
		file *object.File
	}
	dirs := map[string]bool{}
	var entries []entry
	err = tree.Files().ForEach(func(f *object.File) error {
		if f.Mode != filemode.Regular && f.Mode != filemode.Executable {
			return nil // symlinks; submodules are not listed as files
		}
		for d := path.Dir(f.Name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			entries = append(entries, entry{name: d})
		}
		entries = append(entries, entry{name: f.Name, file: f})
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read tree of %s: %w", commit.Hash, err)
	}
	var unpacked int64
	for _, e := range entries {
		unpacked += extract.EntryCost
		if e.file != nil {
			unpacked += e.file.Size
		}
	}
	if unpacked > MaxUnpackedBytes {
		return nil, 0, fmt.Errorf("the tree of %s unpacks to %s on a device (%d files and folders of %s each, and their bytes), %s over the %s a device unpacks (ocisource.MaxUnpackedBytes); devices would refuse it, so it is not published: remove large files from the fleet repo",
			commit.Hash, printable.HumanBytes(unpacked), len(entries), printable.HumanBytes(extract.EntryCost), printable.HumanBytes(unpacked-MaxUnpackedBytes), printable.HumanBytes(MaxUnpackedBytes))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	buf := &cappedBuffer{limit: MaxLayerBytes}
	zw, err := gzip.NewWriterLevel(buf, gzip.BestCompression)
	if err != nil {
		return nil, 0, err
	}
	tw := tar.NewWriter(zw)
	epoch := time.Unix(0, 0).UTC()
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: epoch}
		if e.file == nil {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.name+"/", 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, e.file.Size
			if e.file.Mode == filemode.Executable {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, 0, err
		}
		if e.file == nil {
			continue
		}
		r, err := e.file.Reader()
		if err != nil {
			return nil, 0, err
		}
		_, err = io.Copy(tw, r)
		r.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("read %s at %s: %w", e.name, commit.Hash, err)
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return nil, 0, err
	}
	if buf.n > MaxLayerBytes {
		return nil, 0, fmt.Errorf("the layer of %s is %s compressed, %s over the %s a device downloads (ocisource.MaxLayerBytes); devices would refuse it, so it is not published: remove large or incompressible files from the fleet repo",
			commit.Hash, printable.HumanBytes(buf.n), printable.HumanBytes(buf.n-MaxLayerBytes), printable.HumanBytes(MaxLayerBytes))
	}
	return buf.Bytes(), unpacked, nil
}

// cappedBuffer keeps what is written up to limit bytes, then only counts,
// so a layer too large to publish is measured without being held.
type cappedBuffer struct {
	bytes.Buffer
	limit, n int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	if b.n > b.limit {
		b.Reset()
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
