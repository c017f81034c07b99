package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// Update is the -update flag.
var Update = flag.Bool("update", false, "rewrite golden files in testdata/")

// Assert compares got with testdata/name, rewriting the file first when
// -update is given.
func Assert(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test with -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("output differs from %s (run go test with -update if the change is intended)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
