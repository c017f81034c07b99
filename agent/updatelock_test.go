//go:build linux

package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/rollout"
)

// lockedDevice is a device with two files and a service that declares an
// update lock; %s are file b's content, the service's argument and its
// updateLock.
const lockedDevice = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n" +
	"  files:\n    - {path: /etc/infer/a, content: v1}\n    - {path: /etc/infer/b, content: %s}\n" +
	"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"%s\"]\n      stopTimeout: 2s\n" +
	"      updateLock: %s\n"

// holdLock starts a real process, util-linux's flock(1), that takes an
// exclusive flock on path and keeps it, and waits until the lock is
// held. release kills it (and the sleep it runs) and waits until the lock
// is free.
func holdLock(t *testing.T, path string) (pid int, release func()) {
	t.Helper()
	bin, err := exec.LookPath("flock")
	require.NoError(t, err, "flock(1) is part of util-linux, essential on Debian")
	cmd := exec.Command(bin, path, "sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		require.Eventually(t, func() bool { h, err := flock.Probe(path); return err == nil && !h.Held },
			10*time.Second, 10*time.Millisecond, "the lock is let go once its holders are dead")
	}
	t.Cleanup(release)
	require.Eventually(t, func() bool { h, err := flock.Probe(path); return err == nil && h.Held },
		10*time.Second, 10*time.Millisecond, "flock takes the lock")
	return cmd.Process.Pid, release
}

// servicePID is the pid of a service's replica 0, from its record in
// stateDir.
func servicePID(t *testing.T, stateDir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "services", name, "0.json"))
	require.NoError(t, err)
	var rec struct {
		Proc struct {
			PID int `json:"pid"`
		} `json:"proc"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	require.Positive(t, rec.Proc.PID)
	return rec.Proc.PID
}

// A release that would restart a service waits while a process holds the
// service's update lock: the node keeps the applied revision and reverts
// drift, status and tend_release_held{reason="lock"} name the lock and the
// holder's pid, and the first tick after the lock is let go takes the
// release. A release that leaves the service alone does not wait; a
// commit that moves the lock waits for the path the running service
// declared; past maxLockWait the release is taken with the lock held.
func TestUpdateLockHoldsARelease(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b1", "v1", "/run/infer/update.lock"))
	repo.Commit("v1")
	c := newConfig(t, repo.Dir())
	h := heldLoopOf(c)
	t.Cleanup(func() { killServices(t, c.StateDir) })
	var logs bytes.Buffer
	h.r.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	lock := filepath.Join(c.Root, "run/infer/update.lock")
	require.NoError(t, os.MkdirAll(filepath.Dir(lock), 0o755))
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	heldBy := func() map[string]float64 {
		got := scrape(t, h.metrics)
		out := map[string]float64{}
		for _, reason := range append(rollout.Causes, rollout.CauseQuarantined) {
			v, ok := got[`tend_release_held{reason="`+reason+`"}`]
			require.True(t, ok, "tend_release_held{reason=%q} exists", reason)
			out[reason] = v
		}
		return out
	}
	notHeld := map[string]float64{"wave": 0, "window": 0, "paused": 0, "brakes": 0, "gate": 0, "lock": 0, "quarantined": 0}
	require.Equal(t, notHeld, heldBy(), "every reason exists at zero from the start")
	applied := func(want ...string) {
		t.Helper()
		var got []string
		for _, a := range h.res.Applied {
			got = append(got, a.Resource)
		}
		require.Equal(t, want, got)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(c.Root, p))
		require.NoError(t, err)
		return string(b)
	}

	h.scheduled()
	require.NoError(t, h.err)
	first := servicePID(t, c.StateDir, "infer")
	holder, release := holdLock(t, lock)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b2", "v1", "/run/infer/update.lock"))
	repo.Commit("b2: the service is left alone")
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "a release that does not stop the locked service does not wait")
	require.Equal(t, "b2", read("etc/infer/b"))
	require.Equal(t, first, servicePID(t, c.StateDir, "infer"))

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b2", "v2", "/run/infer/update.lock"))
	v2 := repo.Commit("v2: the service restarts")
	h.scheduled()
	require.NoError(t, h.err)
	why := "held: update lock /run/infer/update.lock held by pid " + strconv.Itoa(holder)
	require.NotNil(t, h.res.Held)
	require.Equal(t, rollout.CauseLock, h.res.Held.Cause)
	require.Equal(t, why, h.res.Held.Reason)
	require.Equal(t, []string{"service/infer"}, h.res.Held.Resources)
	applied()
	require.Equal(t, first, servicePID(t, c.StateDir, "infer"), "the service is not restarted while its lock is held")
	st := h.tracker.Status()
	require.Equal(t, status.ResultHeld, st.Result)
	require.Equal(t, why, st.Held)
	require.Equal(t, "HEAD@sha1:"+v2, st.TargetRevision)
	require.Empty(t, st.LastError)
	lockHeld := map[string]float64{"wave": 0, "window": 0, "paused": 0, "brakes": 0, "gate": 0, "lock": 1, "quarantined": 0}
	require.Equal(t, lockHeld, heldBy())
	require.Contains(t, logs.String(), "release held by an update lock")

	require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
	now = now.Add(10 * time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", read("etc/infer/a"), "drift of another resource is reverted while the release waits")
	applied("file/etc/infer/a")
	require.Equal(t, why, h.res.Held.Reason)
	require.Equal(t, first, servicePID(t, c.StateDir, "infer"))

	// A commit that moves the lock still waits for the one the running
	// service declared.
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b2", "v2", "/run/infer/moved.lock"))
	repo.Commit("v2, and the lock moves")
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, why, h.res.Held.Reason)
	require.Equal(t, first, servicePID(t, c.StateDir, "infer"))

	release()
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "the first tick after the lock is let go takes the release")
	applied("service/infer")
	second := servicePID(t, c.StateDir, "infer")
	require.NotEqual(t, first, second, "restarted")
	require.Equal(t, status.ResultSuccess, h.tracker.Status().Result)
	require.Empty(t, h.tracker.Status().Held)
	require.Equal(t, notHeld, heldBy())

	// Past maxLockWait (an hour by default), counted from the first tick
	// the lock held the release, the release is taken with the lock held.
	moved := filepath.Join(c.Root, "run/infer/moved.lock")
	require.NoError(t, os.WriteFile(moved, nil, 0o644))
	holder, _ = holdLock(t, moved)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b2", "v3", "/run/infer/moved.lock"))
	repo.Commit("v3")
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: update lock /run/infer/moved.lock held by pid "+strconv.Itoa(holder), h.res.Held.Reason)
	now = now.Add(59 * time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held, "still within maxLockWait")
	require.Equal(t, second, servicePID(t, c.StateDir, "infer"))

	now = now.Add(time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "maxLockWait is over")
	applied("service/infer")
	require.NotEqual(t, second, servicePID(t, c.StateDir, "infer"))
	held, err := flock.Probe(moved)
	require.NoError(t, err)
	require.True(t, held.Held, "taken while the lock is still held")
	require.Contains(t, logs.String(), "update lock held for longer than maxLockWait; taking the release anyway")
	require.Equal(t, notHeld, heldBy())
}

// Under a rollout the lock is probed once the wave lets the release
// through, and maxLockWait counts from then: a wave that held the release
// for longer does not use the lock's wait up.
func TestUpdateLockWaitCountsFromTheLockNotTheFirstSight(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b1", "v1", "/run/infer/update.lock"))
	repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(waveRollout, false))
	repo.Commit("v1")
	c := newConfig(t, repo.Dir())
	h := heldLoopOf(c)
	t.Cleanup(func() { killServices(t, c.StateDir) })
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	lock := filepath.Join(c.Root, "run/infer/update.lock")
	require.NoError(t, os.MkdirAll(filepath.Dir(lock), 0o755))
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	h.scheduled()
	require.NoError(t, h.err)
	first := servicePID(t, c.StateDir, "infer")
	holder, _ := holdLock(t, lock)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(lockedDevice, "b1", "v2", "/run/infer/update.lock"))
	repo.Commit("v2")
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, rollout.CauseWave, h.res.Held.Cause, "the wave holds it first")

	now = now.Add(3 * time.Hour) // the wave opened two hours ago: past maxLockWait since the first sight
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, "held: update lock /run/infer/update.lock held by pid "+strconv.Itoa(holder), h.res.Held.Reason)
	require.Equal(t, 0, h.res.Held.Wave)
	got := scrape(t, h.metrics)
	require.Equal(t, 0.0, got[`tend_release_held{reason="wave"}`])
	require.Equal(t, 1.0, got[`tend_release_held{reason="lock"}`])

	now = now.Add(59 * time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, first, servicePID(t, c.StateDir, "infer"))

	now = now.Add(time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "an hour after the lock first held it")
	require.NotEqual(t, first, servicePID(t, c.StateDir, "infer"))
}
