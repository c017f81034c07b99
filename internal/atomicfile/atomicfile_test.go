package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWholeWithExactMode(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, Write(dir, "f", []byte("one"), 0o644))
	require.NoError(t, Write(dir, "f", []byte("two"), 0o640))
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, "two", string(got))
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm(), "the umask plays no part")
	requireNoTemp(t, dir)
}

func TestWriteLongName(t *testing.T) {
	for _, base := range []string{strings.Repeat("a", 250), strings.Repeat("é", 125), strings.Repeat("🦀", 63)} {
		dir := t.TempDir()
		require.NoError(t, Write(dir, base, []byte("long"), 0o644))
		require.NoError(t, Write(dir, base, []byte("longer"), 0o644), "update over the existing file")
		got, err := os.ReadFile(filepath.Join(dir, base))
		require.NoError(t, err)
		require.Equal(t, "longer", string(got))
		requireNoTemp(t, dir)
	}
}

func TestWriteFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "taken"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "taken", "x"), nil, 0o644))
	err := Write(dir, "taken", []byte("data"), 0o644)
	require.Error(t, err, "a rename over a non-empty folder fails")
	requireNoTemp(t, dir)
}

func TestSwapLink(t *testing.T) {
	dir := t.TempDir()
	r, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, SwapLink(r, "current", "/v1"))
	require.NoError(t, SwapLink(r, "current", "/v2"))
	target, err := os.Readlink(filepath.Join(dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "/v2", target)
	requireNoTemp(t, dir)
}

func TestJSON(t *testing.T) {
	for name, write := range map[string]func(dir, name string, v any, mode fs.FileMode) error{
		"WriteJSON": WriteJSON, "WriteJSONNoDirSync": WriteJSONNoDirSync,
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "made")
			require.NoError(t, write(dir, "html.json", map[string]string{"reason": "old"}, 0o644))
			require.NoError(t, write(dir, "html.json", map[string]string{"reason": "<directory> & more"}, 0o600))
			data, err := os.ReadFile(filepath.Join(dir, "html.json"))
			require.NoError(t, err)
			require.Equal(t, "{\n  \"reason\": \"<directory> & more\"\n}\n", string(data), "written as it is, for people to read")
			fi, err := os.Stat(filepath.Join(dir, "html.json"))
			require.NoError(t, err)
			require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
			requireNoTemp(t, dir)
		})
	}
}

func TestTruncateName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"shorter", "config.yaml", 64, "config.yaml"},
		{"exact", "abcd", 4, "abcd"},
		{"ascii cut", "abcdef", 4, "abcd"},
		{"cut inside a two-byte rune", "abcé", 4, "abc"},
		{"cut after a two-byte rune", "abé", 4, "abé"},
		{"cut inside a three-byte rune", "a€b", 3, "a"},
		{"cut inside a four-byte rune", "ab🦀", 5, "ab"},
		{"nothing fits", "🦀", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncateName(tt.in, tt.n)
			require.Equal(t, tt.want, got)
			require.True(t, utf8.ValidString(got))
			require.LessOrEqual(t, len(got), tt.n)
		})
	}
	require.Less(t, len(TempPrefix)+tempBaseMax+1+12, 255, "a temporary name fits any file system")
}

func requireNoTemp(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(e.Name(), TempPrefix), "temporary file left: %s", p)
		return nil
	})
	require.NoError(t, err)
}

// A write killed after its temporary file was made leaves it behind; the
// next write of the same file removes it. A symlink planted at the
// temporary name is removed, never written through.
func TestStaleTempIsRemoved(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, TempName("config.yaml"))
	require.NoError(t, os.WriteFile(stale, []byte("half"), 0o600))
	require.NoError(t, Write(dir, "config.yaml", []byte("whole"), 0o644))
	requireNoTemp(t, dir)

	outside := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(outside, []byte("mine"), 0o644))
	require.NoError(t, os.Symlink(outside, stale))
	require.NoError(t, Write(dir, "config.yaml", []byte("again"), 0o644))
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b), "written through a planted link")
	requireNoTemp(t, dir)
	require.Equal(t, TempName("config.yaml"), TempName("config.yaml"), "the same name every time")
	require.NotEqual(t, TempName(strings.Repeat("a", 70)+"1"), TempName(strings.Repeat("a", 70)+"2"), "long names that share a prefix do not collide")
}

// Writers of one file in parallel take turns: every read sees one whole
// version, the last write wins whole, no temporary file is left.
func TestConcurrentWritersOfOneFile(t *testing.T) {
	dir := t.TempDir()
	versions := map[string]bool{}
	for i := range 8 {
		versions[strings.Repeat(string(rune('a'+i)), 64<<10)] = true
	}
	require.NoError(t, Write(dir, "model.bin", []byte(strings.Repeat("a", 64<<10)), 0o644))
	var wg sync.WaitGroup
	for v := range versions {
		wg.Go(func() {
			for range 20 {
				assert.NoError(t, Write(dir, "model.bin", []byte(v), 0o644))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		b, err := os.ReadFile(filepath.Join(dir, "model.bin"))
		require.NoError(t, err)
		require.True(t, versions[string(b)], "read a mixed or torn file of %d bytes", len(b))
	}
	requireNoTemp(t, dir)
}

// A symlink planted at the temporary name that points at another file in
// the same folder is removed, not written through.
func TestPlantedLinkInsideIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other"), []byte("keep"), 0o644))
	require.NoError(t, os.Symlink("other", filepath.Join(dir, TempName("config.yaml"))))
	require.NoError(t, Write(dir, "config.yaml", []byte("new"), 0o644))
	b, err := os.ReadFile(filepath.Join(dir, "other"))
	require.NoError(t, err)
	require.Equal(t, "keep", string(b))
	b, err = os.ReadFile(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
}

// What killed writes left is removed; a write in progress, a file of
// someone else that merely starts with the prefix, and a name cut short
// are kept.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	put := func(name string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	long := strings.Repeat("m", 80)
	put(TempName("config.yaml"))
	put(TempName(long))
	put(TempPrefix + "notes")
	put(TempPrefix + "config.yaml-000000000000")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, TempName("detector"))))
	held, err := os.OpenFile(filepath.Join(dir, TempName("busy.yaml")), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer held.Close()
	require.NoError(t, syscall.Flock(int(held.Fd()), syscall.LOCK_EX))

	r, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer r.Close()
	removed, err := RemoveTemps(r, "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{TempName("config.yaml"), TempName("detector")}, removed)
	var left []string
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	require.ElementsMatch(t, []string{TempName(long), TempPrefix + "notes", TempPrefix + "config.yaml-000000000000", TempName("busy.yaml")}, left)

	removed, err = RemoveTemps(r, "missing")
	require.NoError(t, err)
	require.Empty(t, removed)
}

// A hard link planted at the temporary name (by someone who may write in
// the folder) leads nowhere: the file it links to keeps its content and
// mode, and the file written is a new one, tend's, linked once.
func TestPlantedHardLinkIsNotWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("mine"), 0o600))
	require.NoError(t, os.Link(victim, filepath.Join(dir, TempName("config.yaml"))))
	require.NoError(t, Write(dir, "config.yaml", []byte("tend's"), 0o644))
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b), "written through a planted hard link")
	fi, err := os.Stat(victim)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), fi.Sys().(*syscall.Stat_t).Nlink, "the written file is linked elsewhere")
	requireNoTemp(t, dir)
}
