package extract

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// FuzzExtract unpacks arbitrary bytes as a layer. Whatever it holds,
// nothing is written outside the folder it unpacks into, no symlink there
// points outside it, nothing is writable by group or others or setuid, and
// nothing panics.
func FuzzExtract(f *testing.F) {
	f.Add(tarOf(&tar.Header{Name: "model.onnx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}), false)
	f.Add(tarOf(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o1777}, &tar.Header{Name: "d/s", Typeflag: tar.TypeReg, Mode: 0o4777, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "l/passwd", Typeflag: tar.TypeReg, Size: 1}), false)
	f.Add(tarOf(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "a/../../x"}), false)
	f.Add(tarOf(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}), false)
	f.Add(tarOf(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), false)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(tarOf(&tar.Header{Name: "a/b/c", Typeflag: tar.TypeReg, Mode: 0o600, Size: 2}))
	_ = zw.Close()
	f.Add(gz.Bytes(), true)
	f.Fuzz(func(t *testing.T, layer []byte, gzipped bool) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "in")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		compression := Uncompressed
		if gzipped {
			compression = Gzip
		}
		_ = Extract(context.Background(), bytes.NewReader(layer), compression, dir, &Budget{Limit: 1 << 20})
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 1 {
			t.Fatalf("written beside the folder: %v %v", entries, err)
		}
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				if filepath.IsAbs(target) {
					t.Errorf("%s points at absolute %s", p, target)
				}
				if abs := filepath.Join(filepath.Dir(p), target); abs != dir && !strings.HasPrefix(abs, dir+"/") {
					t.Errorf("%s points out of the folder: %s", p, target)
				}
			case fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || fi.Mode().Perm()&0o022 != 0:
				t.Errorf("%s has mode %s", p, fi.Mode())
			case !fi.Mode().IsRegular() && !fi.IsDir():
				t.Errorf("%s is a %s", p, fi.Mode().Type())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
