package gitsource_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
)

// hostileDir holds the hostile Git responses shared with other tests.
var hostileDir = filepath.Join("..", "testdata", "hostile", "git")

// switchable serves a real repo over smart HTTP until told to answer
// with a handler of its own.
type switchable struct {
	real, now http.Handler
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.now.ServeHTTP(w, r) }

// hostileServer answers the ref advertisement with the file adv and an
// upload-pack request with garbage.pack.
func hostileServer(t *testing.T, adv string) http.Handler {
	advBody, err := os.ReadFile(filepath.Join(hostileDir, adv))
	require.NoError(t, err)
	pack, err := os.ReadFile(filepath.Join(hostileDir, "garbage.pack"))
	require.NoError(t, err)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/info/refs"):
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			_, _ = w.Write(advBody)
		case strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
			_, _ = w.Write(pack)
		default:
			http.NotFound(w, r)
		}
	})
}

// cloneFiles lists the files of a clone with their sizes.
func cloneFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			out[p] = fi.Size()
		}
		return nil
	}))
	return out
}

// Whatever a remote sends, the clone tend keeps is its own: it is never
// deleted for what the remote said, and the node is held at the last
// applied commit from it.
func TestHostileRemoteNeverDeletesTheClone(t *testing.T) {
	for _, adv := range []string{"zero-id.adv", "new-commit.adv", "malformed-pkt.adv", "err-line.adv"} {
		t.Run(strings.TrimSuffix(adv, ".adv"), func(t *testing.T) {
			f := newFleet(t)
			real := testgit.HTTPHandler(t, filepath.Dir(f.repo.Dir()))
			h := &switchable{real: real, now: real}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			url := srv.URL + "/" + filepath.Base(f.repo.Dir())
			dir := filepath.Join(t.TempDir(), "clone")
			src := gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017"}
			first, err := fetch(t, dir, src)
			require.NoError(t, err)
			before := cloneFiles(t, dir)

			h.now = hostileServer(t, adv)
			src.LastApplied = first.Revision.Commit
			snap, err := fetch(t, dir, src)
			require.NoError(t, err, "the node is held, not failed")
			require.Equal(t, first.Revision.Commit, snap.Revision.Commit)
			require.Equal(t, first.Files, snap.Files)
			require.Error(t, snap.Stale)
			require.Equal(t, before, cloneFiles(t, dir), "the clone changed")
		})
	}
}

// A server that accepts the connection and then sends nothing, or trickles
// its answer, times the fetch out; the node is still held at its last
// applied commit from the clone, so drift is reverted meanwhile. A
// shutdown is not held: the tick ends.
func TestHangingRemoteIsHeld(t *testing.T) {
	silent := func(real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	}
	// trickle sends the real answer a byte every 50ms.
	trickle := func(real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			real.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			for _, b := range rec.Body.Bytes() {
				if _, err := w.Write([]byte{b}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	for _, tc := range []struct {
		name     string
		hang     func(http.Handler) http.Handler
		shutdown bool
	}{
		{"silent", silent, false},
		{"trickle", trickle, false},
		{"a shutdown is not held", silent, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			real := testgit.HTTPHandler(t, filepath.Dir(f.repo.Dir()))
			h := &switchable{real: real, now: real}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			url := srv.URL + "/" + filepath.Base(f.repo.Dir())
			dir := filepath.Join(t.TempDir(), "clone")
			src := gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017"}
			first, err := fetch(t, dir, src)
			require.NoError(t, err)

			h.now = tc.hang(real)
			src.LastApplied = first.Revision.Commit
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if tc.shutdown {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			snap, err := gitsource.Fetch(ctx, src, gitsource.Options{Dir: dir})
			if tc.shutdown {
				require.ErrorIs(t, err, context.Canceled)
				return
			}
			require.NoError(t, err, "a timed-out fetch holds the node")
			require.Equal(t, first.Revision.Commit, snap.Revision.Commit)
			require.Equal(t, first.Files, snap.Files)
			require.ErrorContains(t, snap.Stale, "unreachable; holding the last applied commit "+first.Revision.Commit[:12])
		})
	}
}

// A server that advertises refs without end is cut off at MaxReadBytes:
// tend's memory does not grow with it, and the node is held.
func TestEndlessRefsAreCutOff(t *testing.T) {
	old := gitsource.MaxReadBytes
	gitsource.MaxReadBytes = 1 << 20
	t.Cleanup(func() { gitsource.MaxReadBytes = old })
	f := newFleet(t)
	real := testgit.HTTPHandler(t, filepath.Dir(f.repo.Dir()))
	h := &switchable{real: real, now: real}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	url := srv.URL + "/" + filepath.Base(f.repo.Dir())
	dir := filepath.Join(t.TempDir(), "clone")
	src := gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017"}
	first, err := fetch(t, dir, src)
	require.NoError(t, err)

	var sent atomic.Int64
	h.now = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		_, _ = w.Write([]byte("001e# service=git-upload-pack\n0000"))
		first := fmt.Sprintf("%040x HEAD\x00symref=HEAD:refs/heads/main\n", 1)
		_, _ = fmt.Fprintf(w, "%04x%s", len(first)+4, first)
		for i := 0; ; i++ {
			line := fmt.Sprintf("%040x refs/heads/b%d\n", i+1, i)
			n, err := fmt.Fprintf(w, "%04x%s", len(line)+4, line)
			sent.Add(int64(n))
			if err != nil || sent.Load() > 64<<20 {
				return
			}
		}
	})
	src.LastApplied = first.Revision.Commit
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Equal(t, first.Revision.Commit, snap.Revision.Commit)
	require.ErrorContains(t, snap.Stale, "sent more than 1 MiB on one connection: tend stops reading")
	require.Less(t, sent.Load(), int64(64<<20), "the server was read to its end")
}

// A clone made again for its size (or pack count) replaces the old one
// only once it is complete: when the server fails it half-way, the old
// clone stays, and the node is still held from it.
func TestCloneAgainKeepsTheOldOnFailure(t *testing.T) {
	f := newFleet(t)
	real := testgit.HTTPHandler(t, filepath.Dir(f.repo.Dir()))
	var refs atomic.Int32
	failing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && refs.Add(1) > 1 {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		real.ServeHTTP(w, r)
	})
	h := &switchable{real: real, now: real}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	src := gitsource.Source{URL: srv.URL + "/" + filepath.Base(f.repo.Dir()), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	src.LastApplied = first.Revision.Commit

	h.now = failing // the tick's own request passes; the clone again fails
	var logs strings.Builder
	snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, MaxCloneBytes: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.Nil(t, snap.Stale)
	require.Contains(t, logs.String(), "clone again failed; the old clone is kept")

	snap, err = fetch(t, dir, src) // the server is down now
	require.NoError(t, err, "no clone left to hold the node from")
	require.Equal(t, first.Revision.Commit, snap.Revision.Commit)
	require.Error(t, snap.Stale)
}

// The bound is one fetch's: a healthy server read tick after tick over
// a kept-alive connection never reaches it.
func TestReadBoundIsPerFetch(t *testing.T) {
	old := gitsource.MaxReadBytes
	gitsource.MaxReadBytes = 16 << 10
	t.Cleanup(func() { gitsource.MaxReadBytes = old })
	f := newFleet(t)
	srv := testgit.StartHTTP(t, filepath.Dir(f.repo.Dir()))
	src := gitsource.Source{URL: f.repo.URL(srv.URL), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	for i := range 60 {
		snap, err := fetch(t, dir, src)
		require.NoError(t, err, "fetch %d", i)
		require.Nil(t, snap.Stale, "fetch %d", i)
	}
}

// A manifest larger than manifest.MaxFileBytes in the repo is not read:
// the commit cannot be used (the node is held at its last applied one),
// and the error names the file.
func TestLargeManifestIsNotRead(t *testing.T) {
	f := newFleet(t)
	dir := filepath.Join(t.TempDir(), "clone")
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	f.repo.WriteFile("devices/cam-017/big.yaml", "content: \""+strings.Repeat("x", 4<<20)+"\"\n")
	f.repo.Commit("a big manifest")
	src.LastApplied = first.Revision.Commit
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Equal(t, first.Revision.Commit, snap.Revision.Commit, "held at the last applied commit")
	require.ErrorContains(t, snap.Stale, "devices/cam-017/big.yaml: the file is 4194316 bytes; a manifest file may be at most 1048576")
}

// Git stores a file once however many paths name it: one 1 MiB manifest at
// 70 paths is a small commit that names 70 MiB. The files under a source
// path are bounded by their sizes before any is read, so the commit is
// refused (the node held at its last applied one) instead of read whole.
func TestOneBlobAtManyPathsIsNotRead(t *testing.T) {
	f := newFleet(t)
	dir := filepath.Join(t.TempDir(), "clone")
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	big := "content: \"" + strings.Repeat("x", manifest.MaxFileBytes-20) + "\"\n"
	for i := range 70 {
		f.repo.WriteFile(fmt.Sprintf("devices/cam-017/copies/c%02d.yaml", i), big)
	}
	f.repo.Commit("one blob, 70 paths")
	src.LastApplied = first.Revision.Commit
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Equal(t, first.Revision.Commit, snap.Revision.Commit, "held at the last applied commit")
	require.ErrorContains(t, snap.Stale, "devices/cam-017/copies/c64.yaml: the manifest files under one source path add up to more than 67108864 bytes (64 MiB) by this one")
}
