package store

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
)

// tarOf is a tar stream of the given headers (file bodies "x…").
func tarOf(hs ...*tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		_ = tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	_ = tw.Close()
	return buf.Bytes()
}

// FuzzTreeMatchesExtract unpacks arbitrary bytes as a model's layer
// twice: from the tar (extract, as an image's layer over an earlier one
// when overlay), and as the store does, into its tree and from there into
// a folder (Unpack, replay). Either both fail or both leave the same
// entries: names, types, modes (but the write bit a tree's file never
// has), content and link targets. Symlinks are kept wherever they point,
// and nothing is written through one: a folder beside the version's, which
// a link may name, stays empty.
func FuzzTreeMatchesExtract(f *testing.F) {
	f.Add(tarOf(&tar.Header{Name: "model.onnx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}), false)
	f.Add(tarOf(&tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o1777}, &tar.Header{Name: "d/s", Typeflag: tar.TypeReg, Mode: 0o4777, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1}, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 2}), true)
	f.Add(tarOf(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1}, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 2}), false)
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d"}, &tar.Header{Name: "l/x", Typeflag: tar.TypeReg, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1}, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}), false)
	f.Add(tarOf(&tar.Header{Name: "lower/.wh.f", Typeflag: tar.TypeReg}, &tar.Header{Name: "lower/.wh..wh..opq", Typeflag: tar.TypeReg}), true)
	f.Add(tarOf(&tar.Header{Name: "lower", Typeflag: tar.TypeReg, Size: 1}), true)
	f.Add(tarOf(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), false)
	f.Add(tarOf(&tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "host", Typeflag: tar.TypeSymlink, Linkname: "/etc/hostname"}), false)
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../outside"}, &tar.Header{Name: "l/x", Typeflag: tar.TypeReg, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../outside/x"}, &tar.Header{Name: "l", Typeflag: tar.TypeReg, Size: 1}), true)
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../outside"}, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "l/x"}), false)
	// The layer an image's layer applies over.
	lower := tarOf(&tar.Header{Name: "lower/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}, &tar.Header{Name: "lower/g", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	f.Fuzz(func(t *testing.T, layer []byte, overlay bool) {
		ctx := context.Background()
		fromTar := filepath.Join(t.TempDir(), "tar")
		fromTree := filepath.Join(t.TempDir(), "tree")
		for _, dir := range []string{fromTar, fromTree} {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "..", "outside"), 0o700); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if left, err := os.ReadDir(filepath.Join(dir, "..", "outside")); err != nil || len(left) > 0 {
					t.Errorf("written through a link out of the folder: %v %v", left, err)
				}
			})
			if overlay {
				if err := extract.ExtractLayer(ctx, bytes.NewReader(lower), extract.Uncompressed, dir, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A budget, as a sparse entry may stand for any size: each way
		// counts its own writes, so one past it says nothing of the other.
		budget := func() *extract.Budget { return &extract.Budget{Limit: 4 << 20} }
		model := extract.Rules{Overlay: overlay, Model: true}
		skippedTar, errTar := model.Extract(ctx, bytes.NewReader(layer), extract.Uncompressed, fromTar, budget())
		s, err := NewStore(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		d, _, _ := v1.SHA256(bytes.NewReader(layer))
		if err := s.Put(d, layer); err != nil {
			t.Fatal(err)
		}
		var skippedTree []extract.Special
		errTree := s.Unpack(ctx, modelkit.Entry{Digest: d, Unpack: true}, budget(), false)
		if errTree == nil {
			rec, err := s.readTree(d)
			if err != nil {
				t.Fatal(err)
			}
			var r replayed
			r, errTree = replay(ctx, s.tree(d), rec, fromTree, budget(), model, "")
			skippedTree = r.skipped
		}
		if errors.Is(errTar, extract.ErrTooLarge) || errors.Is(errTree, extract.ErrTooLarge) {
			return
		}
		if (errTar == nil) != (errTree == nil) {
			t.Fatalf("from the tar: %v; from the tree: %v", errTar, errTree)
		}
		if errTar != nil {
			return
		}
		if a, b := listing(t, fromTar), listing(t, fromTree); a != b {
			t.Fatalf("from the tar:\n%s\nfrom the tree:\n%s", a, b)
		}
		if fmt.Sprint(skippedTar) != fmt.Sprint(skippedTree) {
			t.Fatalf("skipped from the tar: %v; from the tree: %v", skippedTar, skippedTree)
		}
	})
}

// listing describes every entry under dir, one a line.
func listing(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		mode := fi.Mode()
		if mode.IsRegular() {
			mode &^= 0o222
		}
		extra := ""
		switch {
		case mode&fs.ModeSymlink != 0:
			extra, err = os.Readlink(p)
		case mode.IsRegular():
			var body []byte
			body, err = os.ReadFile(p)
			extra = string(body)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s %q\n", rel, mode, extra)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
