package confine

import (
	"errors"
	"path"
	"strings"
	"testing"
)

// FuzzLocate checks arbitrary paths against allowed paths. A path that is
// located is clean, absolute and exactly its allowed folder joined with
// the rest, and that rest never climbs out of it; one that is not gets an
// error wrapping ErrInvalidPath or ErrNotAllowed.
func FuzzLocate(f *testing.F) {
	for _, p := range []string{"/etc/infer/config.yaml", "/etc/infer", "/etc/inferx/a", "/etc/infer/../passwd", "/etc//infer/a",
		"etc/infer/a", "/opt/models/m/", "/opt/models/\x00", "/", "", "/etc/infer/./a", "/opt/models/.."} {
		f.Add(p)
	}
	allow := []string{"/etc/infer", "/opt/models"}
	f.Fuzz(func(t *testing.T, p string) {
		a, rel, err := Locate(p, allow)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) && !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("unclassified error for %q: %v", p, err)
			}
			return
		}
		if path.Clean(p) != p || !path.IsAbs(p) || strings.Contains(p, "\x00") {
			t.Fatalf("located unclean %q", p)
		}
		if a != "/etc/infer" && a != "/opt/models" {
			t.Fatalf("%q located in %q", p, a)
		}
		if rel == "" || path.Join(a, rel) != p || rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) {
			t.Fatalf("%q split into %q and %q", p, a, rel)
		}
	})
}
