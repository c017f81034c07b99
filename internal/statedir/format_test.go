package statedir_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

// fixture copies testdata/format1 into a new stateDir: files as a tend of
// format 1 wrote them (inventory, service and instance records, the model
// record and releases.json from a run of that tend; the others in the
// shapes its code wrote), with the modes tend gives them.
func fixture(t testing.TB) statedir.Dir {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.CopyFS(dst, os.DirFS("testdata/format1")))
	require.NoError(t, filepath.WalkDir(dst, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		mode := fs.FileMode(0o644)
		switch filepath.Base(p) {
		case statedir.InventoryFile, statedir.ReleasesFile, "0.json":
			mode = 0o600
		case statedir.TreeRecordFile:
			mode = 0o444
		}
		return os.Chmod(p, mode)
	}))
	for dir, mode := range map[string]fs.FileMode{".": statedir.Mode, "models": 0o755, "models/detector": 0o755, "services": 0o700, "services/infer": 0o700} {
		require.NoError(t, os.Chmod(filepath.Join(dst, dir), mode))
	}
	return statedir.Dir(dst)
}

// modes returns the mode of every folder under dir (relative).
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return err
		}
		fi, err := e.Info()
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fi.Mode()
		return err
	}))
	return out
}

// versionedFiles are the files of the fixture that carry a format.
var versionedFiles = []string{
	"inventory.json", "quarantine.json", "releases.json", "report.json", "suspended",
	"oci/sha256-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/artifact.json",
	"blobs/trees/sha256/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/entries.json",
	"models/refused.json", "models/detector/model.json",
	"services/images.json", "services/infer/service.json", "services/infer/0.json",
	"services/cam/service.json", "services/cam/0.json",
}

// decoded reads every versioned file of d as tend's readers see it, the
// formatVersion left out.
func decoded(t *testing.T, d statedir.Dir) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, rel := range versionedFiles {
		var v any
		found, err := statedir.ReadJSON(filepath.Join(string(d), rel), &v)
		require.NoError(t, err, rel)
		require.True(t, found, rel)
		if m, ok := v.(map[string]any); ok {
			delete(m, "formatVersion")
		}
		out[rel] = v
	}
	return out
}

// A stateDir of format 1 is migrated: a copy of every file it rewrites,
// as it was; each file in format 2 (formatVersion first, collections
// wrapped), read back as the same values, with its mode; what is no state
// file (a removed model's folder, an artifact or tree being built) is left
// alone; the marker last. A second migration does nothing, and the copy
// goes when asked.
func TestMigrateFormat1(t *testing.T) {
	d := fixture(t)
	orig := statedir.ReadTree(t, string(d))
	want := decoded(t, d)
	modes := map[string]fs.FileMode{}
	for _, rel := range versionedFiles {
		fi, err := os.Stat(filepath.Join(string(d), rel))
		require.NoError(t, err)
		modes[rel] = fi.Mode()
	}
	n, _, err := d.ReadMarker()
	require.NoError(t, err)
	require.Equal(t, 1, n, "no marker is format 1")

	mig, err := d.Migrate("v9.9.9", "0123abc")
	require.NoError(t, err)
	require.Equal(t, statedir.Migration{From: 1, Copy: d.FormatCopy(1)}, mig)

	n, m, err := d.ReadMarker()
	require.NoError(t, err)
	require.Equal(t, statedir.Format, n)
	require.Equal(t, statedir.Marker{FormatVersion: strconv.Itoa(statedir.Format), Tend: "v9.9.9", Commit: "0123abc"}, m)
	require.NoError(t, d.Check())

	require.Equal(t, want, decoded(t, d), "every file reads back as it did")
	head := []byte("{\n  \"formatVersion\": \"" + strconv.Itoa(statedir.Format) + "\"")
	for _, rel := range versionedFiles {
		p := filepath.Join(string(d), rel)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(b, head), "%s starts with its format: %s", rel, b)
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, modes[rel], fi.Mode(), "%s keeps its mode", rel)
	}
	q, err := os.ReadFile(d.Quarantine())
	require.NoError(t, err)
	require.Contains(t, string(q), `"quarantined": {`)
	require.Contains(t, string(q), "<after>", "strings are written as they are")
	img, err := os.ReadFile(d.Services().Images())
	require.NoError(t, err)
	require.Contains(t, string(img), `"images": [`)

	now := statedir.ReadTree(t, string(d))
	for _, rel := range []string{"oci/.tmp-123/artifact.json", "models/.removed-old/model.json", "blobs/trees/partial/sha256-cc/entries.json"} {
		require.Equal(t, orig[rel], now[rel], "%s is no state file: left alone", rel)
	}
	copied := statedir.ReadTree(t, d.FormatCopy(1))
	require.Len(t, copied, len(versionedFiles))
	for _, rel := range versionedFiles {
		require.Equal(t, orig[rel], copied[rel], "%s: the copy holds the file as it was", rel)
	}

	mig, err = d.Migrate("v9.9.10", "4567def")
	require.NoError(t, err)
	require.Equal(t, statedir.Migration{From: statedir.Format}, mig)
	after := statedir.ReadTree(t, string(d))
	require.Equal(t, now, after, "a migrated stateDir is not migrated again")

	require.NoError(t, d.DropFormatCopies())
	_, err = os.Stat(d.FormatCopy(1))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, d.DropFormatCopies(), "nothing to drop")
}

// A stateDir no tend has run on (missing, or empty) gets the marker alone.
func TestMigrateNew(t *testing.T) {
	d := statedir.Dir(filepath.Join(t.TempDir(), "state"))
	mig, err := d.Migrate("v1", "c")
	require.NoError(t, err)
	require.Equal(t, statedir.Migration{From: 1}, mig, "nothing to copy")
	require.Equal(t, map[string]string{statedir.FormatFile: "{\n  \"formatVersion\": \"" + strconv.Itoa(statedir.Format) +
		"\",\n  \"tend\": \"v1\",\n  \"commit\": \"c\"\n}\n"}, statedir.ReadTree(t, string(d)))
}

// A stateDir a newer tend migrated is refused, saying which tend wrote it
// and what to install, and nothing in it changes; so is one file in a
// newer format, naming the file.
func TestNewerFormatRefused(t *testing.T) {
	d := fixture(t)
	newer := strconv.Itoa(statedir.Format + 1)
	require.NoError(t, os.WriteFile(d.Format(), []byte(`{"formatVersion":"`+newer+`","tend":"v0.9.0","commit":"abc"}`), 0o644))
	before := statedir.ReadTree(t, string(d))

	err := d.Check()
	var ne *statedir.NewerError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, statedir.NewerError{Path: d.Format(), Format: statedir.Format + 1, Tend: "v0.9.0", Commit: "abc"}, *ne)
	require.EqualError(t, err, d.Format()+" is in state format "+newer+", written by tend v0.9.0; this tend reads format "+
		strconv.Itoa(statedir.Format)+" and older: install tend v0.9.0 or later on this node (this tend changed nothing)")

	_, err = d.Migrate("v0.1.0", "def")
	require.ErrorAs(t, err, &ne)
	require.Equal(t, before, statedir.ReadTree(t, string(d)), "nothing changed")

	file := filepath.Join(t.TempDir(), statedir.QuarantineFile)
	require.NoError(t, os.WriteFile(file, []byte(`{"formatVersion":"`+newer+`","quarantined":{}}`), 0o644))
	var q map[string]any
	_, err = statedir.ReadJSON(file, &q)
	require.ErrorAs(t, err, &ne)
	require.EqualError(t, err, file+" is in state format "+newer+", written by a newer tend; this tend reads format "+
		strconv.Itoa(statedir.Format)+" and older: install the tend that wrote it on this node (this tend changed nothing)")
}

// What a tend writes, it reads back; format 1's shapes read as well; a
// file that is no state file is corrupt, naming it.
func TestEncodeDecode(t *testing.T) {
	dir := t.TempDir()
	type rec struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	require.NoError(t, statedir.WriteJSON(dir, "model.json", rec{"a<b", 1}, 0o644))
	b, err := os.ReadFile(filepath.Join(dir, "model.json"))
	require.NoError(t, err)
	require.Equal(t, "{\n  \"formatVersion\": \""+strconv.Itoa(statedir.Format)+"\",\n  \"name\": \"a<b\",\n  \"n\": 1\n}\n", string(b))
	var r rec
	found, err := statedir.ReadJSON(filepath.Join(dir, "model.json"), &r)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, rec{"a<b", 1}, r)

	require.NoError(t, statedir.WriteJSON(dir, statedir.ImagesFile, []string{"x@sha256:1"}, 0o644))
	var imgs []string
	_, err = statedir.ReadJSON(filepath.Join(dir, statedir.ImagesFile), &imgs)
	require.NoError(t, err)
	require.Equal(t, []string{"x@sha256:1"}, imgs)
	require.NoError(t, statedir.Decode(statedir.ImagesFile, []byte(`["y@sha256:2"]`), &imgs), "format 1: a bare list")
	require.Equal(t, []string{"y@sha256:2"}, imgs)
	rel := map[string]string{}
	require.NoError(t, statedir.Decode(statedir.ReleasesFile, []byte(`{"sha256:1":"t"}`), &rel), "format 1: a bare map")
	require.Equal(t, map[string]string{"sha256:1": "t"}, rel)
	require.NoError(t, statedir.Decode(statedir.ReleasesFile, []byte(`{"formatVersion":"2"}`), &rel), "format 2 without the key: empty")

	found, err = statedir.ReadJSON(filepath.Join(dir, "missing.json"), &r)
	require.NoError(t, err)
	require.False(t, found)

	for _, c := range []struct{ name, data, want string }{
		{"model.json", `[1]`, "a list where an object belongs"},
		{"model.json", `{"formatVersion":2}`, "formatVersion 2 is not a string"},
		{"model.json", `{"formatVersion":"0"}`, `formatVersion "0" is no format`},
		{"model.json", `{"name":`, "unexpected end of JSON input"},
		{statedir.ImagesFile, `{"formatVersion":"2","images":{}}`, "json: cannot unmarshal object"},
	} {
		var target any = &map[string]any{}
		if c.name == statedir.ImagesFile {
			target = &[]string{}
		}
		err := statedir.Decode("/s/"+c.name, []byte(c.data), target)
		require.ErrorIs(t, err, statedir.ErrCorrupt, c.data)
		require.ErrorContains(t, err, "/s/"+c.name+": "+c.want)
	}
}

// A marker that does not read is an error that says what it is for.
func TestCorruptMarker(t *testing.T) {
	d := statedir.Dir(t.TempDir())
	for _, c := range []struct{ data, want string }{
		{`{"formatVersion":`, "it says which format the files in"},
		{`{"formatVersion":"x"}`, `formatVersion "x" is no format`},
	} {
		require.NoError(t, os.WriteFile(d.Format(), []byte(c.data), 0o644))
		err := d.Check()
		require.ErrorIs(t, err, statedir.ErrCorrupt)
		require.ErrorContains(t, err, c.want)
	}
}

// The copy's folders have the modes of the originals (0711 stateDir,
// 0755 models: services of other users reach model versions through
// them), so that restoring it changes none.
func TestCopyKeepsFolderModes(t *testing.T) {
	d := fixture(t)
	_, err := d.Migrate("v1", "c")
	require.NoError(t, err)
	copied, orig := modes(t, d.FormatCopy(1)), modes(t, string(d))
	for rel, mode := range copied {
		if rel == "." {
			continue
		}
		require.Equal(t, orig[rel], mode, "%s in the copy", rel)
	}
	require.Equal(t, fs.ModeDir|0o755, copied["models"])
}

// Putting the copy back leaves the stateDir as the older tend left it:
// every file as it was, with its mode, the folders' modes unchanged, a
// file written since in the new format removed, no marker, no copy. With
// no copy, it says why and what to do.
func TestRestoreFormatCopy(t *testing.T) {
	d := fixture(t)
	orig, dirs := statedir.ReadTree(t, string(d)), modes(t, string(d))
	_, err := d.Migrate("v1", "c")
	require.NoError(t, err)
	require.NoError(t, statedir.WriteJSON(d.Services().Service("new"), statedir.ServiceFile, map[string]int{"replicas": 1}, 0o644))

	removed, err := d.RestoreFormatCopy(1)
	require.NoError(t, err)
	require.Equal(t, []string{"services/new/service.json"}, removed)
	got := statedir.ReadTree(t, string(d))
	require.Equal(t, orig, got)
	after := modes(t, string(d))
	delete(after, "services/new")
	require.Equal(t, dirs, after)
	fi, err := os.Stat(filepath.Join(string(d), "blobs/trees/sha256/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/entries.json"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o444), fi.Mode())

	_, err = d.RestoreFormatCopy(1)
	require.ErrorContains(t, err, "no copy of state format 1 in "+d.FormatCopy(1)+": the first apply that succeeded after the migration removed it")
}

// A copy left from an earlier migration (restored, then the older tend
// ran on) is not taken for this one's: while no file is rewritten yet,
// the copy is built again from the files as they are.
func TestStaleCopyIsBuiltAgain(t *testing.T) {
	d := fixture(t)
	require.NoError(t, os.MkdirAll(d.FormatCopy(1), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(d.FormatCopy(1), statedir.InventoryFile), []byte(`{"formatVersion":"1","resources":{}}`), 0o600))
	inv, err := os.ReadFile(d.Inventory())
	require.NoError(t, err)
	_, err = d.Migrate("v1", "c")
	require.NoError(t, err)
	copied, err := os.ReadFile(filepath.Join(d.FormatCopy(1), statedir.InventoryFile))
	require.NoError(t, err)
	require.Equal(t, string(inv), string(copied))
}

// A stateDir without a marker holding a file a newer tend wrote (its
// migration cut short) is refused, naming the file, and nothing changes.
func TestMigrateRefusesANewerFile(t *testing.T) {
	d := fixture(t)
	newer := fmt.Sprintf(`{"formatVersion":"%d","resources":{}}`, statedir.Format+1)
	require.NoError(t, os.WriteFile(d.Inventory(), []byte(newer), 0o600))
	before := statedir.ReadTree(t, string(d))
	_, err := d.Migrate("v1", "c")
	var ne *statedir.NewerError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, d.Inventory(), ne.Path)
	require.Equal(t, before, statedir.ReadTree(t, string(d)))
}

// A tend that is no release is named by its commit, and the refusal asks
// for a tend of that format rather than a version that does not exist.
func TestNewerErrorOfABuildThatIsNoRelease(t *testing.T) {
	err := &statedir.NewerError{Path: "/s/format.json", Format: 9, Tend: "dev", Commit: "0123abc"}
	require.EqualError(t, err, "/s/format.json is in state format 9, written by tend dev (commit 0123abc); this tend reads format "+
		strconv.Itoa(statedir.Format)+" and older: install a tend that reads format 9, such as the one that wrote it on this node (this tend changed nothing)")
}
