package store

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/transport"
)

// msgWaitingForLock is what a downloader logs when another holds the
// blob's lock.
const msgWaitingForLock = "waiting for another download of the same blob"

// seen is a slog handler that closes a channel the first time a record
// with its message is logged.
type seen struct {
	msg  string
	once *sync.Once
	ch   chan struct{}
}

func newSeen(msg string) seen { return seen{msg: msg, once: &sync.Once{}, ch: make(chan struct{})} }

func (h seen) Enabled(context.Context, slog.Level) bool { return true }
func (h seen) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h seen) WithGroup(string) slog.Handler            { return h }
func (h seen) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

// gatedBlob pushes an 8 MB one-file artifact and holds every blob GET of
// reg until the returned release is called (once).
func gatedBlob(t *testing.T, reg *testoci.Registry) (repo name.Repository, d v1.Hash, size int64, release func()) {
	t.Helper()
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	reg.PushFiles(t, "models/big:v1", map[string][]byte{"model.bin": data})
	repo, err := name.NewRepository(reg.Ref("models/big"))
	require.NoError(t, err)
	d, err = v1.NewHash(testoci.Digest(data))
	require.NoError(t, err)
	gate := make(chan struct{})
	var once sync.Once
	reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}
		return false
	})
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return repo, d, int64(len(data)), release
}

// Two downloads of one blob at once (the agent's stager and a tick) take
// turns: the registry serves its body once, the second finds it stored,
// both succeed.
func TestConcurrentFetchDownloadsOnce(t *testing.T) {
	reg := testoci.Start(t)
	repo, d, size, release := gatedBlob(t, reg)
	waiting := newSeen(msgWaitingForLock)
	s, err := NewStore(t.TempDir(), slog.New(waiting))
	require.NoError(t, err)

	var (
		wg   sync.WaitGroup
		got  [2]int64
		errs [2]error
	)
	for i := range 2 {
		wg.Go(func() { got[i], errs[i] = s.Fetch(t.Context(), repo, d, size, transport.Options{}) })
	}
	<-waiting.ch // one holds the lock, held at the registry; the other waits for it
	// GC does not take the partial file from under a download.
	_, _, err = s.GC(map[string]bool{})
	require.NoError(t, err)
	require.FileExists(t, s.partial(d), "GC leaves a partial file that is being downloaded")
	release()
	wg.Wait()

	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ElementsMatch(t, []int64{size, 0}, got[:], "one downloaded it all, the other nothing")
	require.Equal(t, size, reg.BlobBytes.Load(), "the registry served the blob once")
	require.True(t, s.Has(d))
	require.NoError(t, s.Verify(d))
	require.True(t, s.Has(d), "the blob verifies")
	require.NoFileExists(t, s.partial(d))
}

// GC removes a partial file no one downloads.
func TestGCRemovesIdlePartial(t *testing.T) {
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	d, err := v1.NewHash("sha256:" + strings.Repeat("ab", 32))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(s.partial(d), []byte("half"), 0o644))
	_, _, err = s.GC(map[string]bool{})
	require.NoError(t, err)
	require.NoFileExists(t, s.partial(d))
}

// helperEnv makes the test binary a second tend process that fetches one
// blob into a store (TestFetchHelperProcess).
const helperEnv = "TEND_OCI_FETCH_HELPER"

// A download in another process on the same stateDir (a hand-run tend
// apply beside the agent) waits for the one in progress and downloads
// nothing.
func TestFetchWaitsForAnotherProcess(t *testing.T) {
	reg := testoci.Start(t)
	repo, d, size, release := gatedBlob(t, reg)
	stateDir := t.TempDir()
	s, err := NewStore(stateDir, nil)
	require.NoError(t, err)

	first := make(chan error, 1)
	go func() {
		_, err := s.Fetch(t.Context(), repo, d, size, transport.Options{})
		first <- err
	}()
	// The first download holds the lock once the registry sees its GET.
	require.Eventually(t, func() bool { return lockedByOther(t, s.partial(d)) }, 30*time.Second, 10*time.Millisecond)

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFetchHelperProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%d", helperEnv, stateDir, repo, d, size))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	waited := false
	for !waited && sc.Scan() {
		waited = strings.Contains(sc.Text(), msgWaitingForLock)
	}
	release()
	require.NoError(t, <-first)
	go func() {
		for sc.Scan() {
		}
	}()
	require.NoError(t, cmd.Wait(), stdout.String())
	require.True(t, waited, "the second process waited for the first")
	require.Contains(t, stdout.String(), "downloaded 0 bytes")
	require.Equal(t, size, reg.BlobBytes.Load(), "the registry served the blob once")
	require.NoError(t, s.Verify(d))
	require.True(t, s.Has(d))
}

// lockedByOther reports whether another open file holds path's lock.
func lockedByOther(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	locked, err := tryLock(f)
	require.NoError(t, err)
	return !locked
}

// TestFetchHelperProcess is the second process of
// TestFetchWaitsForAnotherProcess; it does nothing in a normal run.
func TestFetchHelperProcess(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		t.Skip("the helper process of TestFetchWaitsForAnotherProcess")
	}
	var stateDir, repoName, digest string
	var size int64
	parts := strings.Split(arg, "|")
	require.Len(t, parts, 4)
	stateDir, repoName, digest = parts[0], parts[1], parts[2]
	_, err := fmt.Sscan(parts[3], &size)
	require.NoError(t, err)
	s, err := NewStore(stateDir, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	require.NoError(t, err)
	repo, err := name.NewRepository(repoName)
	require.NoError(t, err)
	d, err := v1.NewHash(digest)
	require.NoError(t, err)
	n, err := s.Fetch(context.Background(), repo, d, size, transport.Options{})
	require.NoError(t, err)
	fmt.Printf("downloaded %d bytes\n", n)
}
