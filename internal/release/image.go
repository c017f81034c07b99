package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where the binary sits in the image, and the image's entrypoint: tend's
// (BinDir/NAME for another program, tend-hub's).
const (
	BinDir  = "/usr/local/bin/"
	BinPath = BinDir + "tend"
)

// OCI annotation keys the image and its index carry (and, as labels, its
// configs, which is what docker inspect shows).
const (
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationTitle    = "org.opencontainers.image.title"
	// AnnotationRefName names the index in the layout's index.json: what
	// skopeo's oci-archive:FILE:REF and oras's --from-oci-layout DIR:REF
	// select.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Binary is tend built for one linux platform.
type Binary struct {
	Platform v1.Platform
	Path     string
}

// Image is what goes into the image.
type Image struct {
	Version  string    // the release's version, e.g. v0.1.0: annotations and the layout's ref name
	Revision string    // the commit it was built from
	Source   string    // the repository's URL
	Created  time.Time // SOURCE_DATE_EPOCH: file times, config and annotations
	Binaries []Binary  // one per platform, linux only
	// Program is the binary's name, the image's title ("" is tend): it
	// sits at BinDir/Program.
	Program string
}

// program is the binary's name.
func (im Image) program() string {
	if im.Program == "" {
		return "tend"
	}
	return im.Program
}

// binPath is where the binary sits in the image.
func (im Image) binPath() string { return BinDir + im.program() }

// ParseBinary reads PLATFORM=PATH (linux/arm/v7=dist/tend), as
// imagetool takes its arguments.
func ParseBinary(arg string) (Binary, error) {
	plat, path, ok := strings.Cut(arg, "=")
	if !ok || plat == "" || path == "" {
		return Binary{}, fmt.Errorf("binary %q: want PLATFORM=PATH, e.g. linux/arm64=build/tend", arg)
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return Binary{}, fmt.Errorf("binary %q: platform: %w", arg, err)
	}
	return Binary{Platform: *p, Path: path}, nil
}

// check says what is missing or wrong in im.
func (im Image) check() error {
	switch {
	case im.Version == "":
		return errors.New("image: no version (the release's, e.g. v0.1.0)")
	case im.Revision == "":
		return errors.New("image: no revision (the commit the binaries were built from)")
	case im.Created.IsZero():
		return errors.New("image: no creation time (SOURCE_DATE_EPOCH)")
	case len(im.Binaries) == 0:
		return errors.New("image: no binaries: give one linux binary per platform")
	}
	seen := map[string]bool{}
	for _, b := range im.Binaries {
		p := b.Platform.String()
		if b.Platform.OS != "linux" {
			return fmt.Errorf("image: platform %s: the image is for linux only (the CI commands of other systems ship as archives)", p)
		}
		if b.Platform.Architecture == "" {
			return fmt.Errorf("image: platform %s: no architecture", p)
		}
		if seen[p] {
			return fmt.Errorf("image: platform %s is given twice", p)
		}
		seen[p] = true
	}
	return nil
}

// annotations are the OCI annotations of the index and of each image.
func (im Image) annotations() map[string]string {
	a := map[string]string{
		AnnotationVersion:  im.Version,
		AnnotationRevision: im.Revision,
		AnnotationCreated:  im.Created.UTC().Format(time.RFC3339),
		AnnotationTitle:    im.program(),
	}
	if im.Source != "" {
		a[AnnotationSource] = im.Source
	}
	return a
}

// Index builds the multi-platform image index, one image per binary in
// the order given.
func (im Image) Index() (v1.ImageIndex, error) {
	if err := im.check(); err != nil {
		return nil, err
	}
	var adds []mutate.IndexAddendum
	for _, b := range im.Binaries {
		img, err := im.image(b)
		if err != nil {
			return nil, err
		}
		p := b.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, im.annotations()).(v1.ImageIndex), nil
}

// image is the image of one binary: FROM scratch, the binary at binPath,
// an empty /tmp (tend's temp files), the binary as entrypoint.
func (im Image) image(b Binary) (v1.Image, error) {
	data, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("image for %s: %w", b.Platform.String(), err)
	}
	layer, err := im.layer(data)
	if err != nil {
		return nil, fmt.Errorf("image for %s: %w", b.Platform.String(), err)
	}
	created := v1.Time{Time: im.Created.UTC()}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "make release: " + im.program() + " at " + im.binPath()},
	})
	if err != nil {
		return nil, fmt.Errorf("image for %s: %w", b.Platform.String(), err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image for %s: %w", b.Platform.String(), err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant
	cf.Config.Entrypoint = []string{im.binPath()}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cf.Config.Labels = im.annotations()
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image for %s: %w", b.Platform.String(), err)
	}
	return mutate.Annotations(img, im.annotations()).(v1.Image), nil
}

// layer is the gzipped tar of the image's files, compressed once here so
// that its digest does not depend on how often it is read.
func (im Image) layer(bin []byte) (v1.Layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	mtime := im.Created.UTC()
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	for _, d := range []string{"tmp/", "usr/", "usr/local/", "usr/local/bin/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := dir(d, mode); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(im.binPath(), "/"), Mode: 0o755,
		Size: int64(len(bin)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// WriteArchive writes the image's index as an OCI image layout in a tar
// archive at path (what skopeo calls oci-archive), the index named
// Version in the layout's index.json, and returns the index's digest.
// Entries are sorted and dated Created, so the archive's bytes, like the
// digest, depend only on im.
func (im Image) WriteArchive(path string) (v1.Hash, error) {
	idx, err := im.Index()
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".image-*")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout in %s: %w", dir, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: im.Version})); err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout in %s: %w", dir, err)
	}
	part := filepath.Join(tmp, "archive.tar")
	if err := tarDir(dir, part, im.Created.UTC()); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	if err := os.Rename(part, path); err != nil {
		return v1.Hash{}, fmt.Errorf("image: %w", err)
	}
	return digest, nil
}

// tarDir writes the files and folders under dir to a tar at out, sorted
// by name, owned by root, dated mtime.
func tarDir(dir, out string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: mtime, Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
