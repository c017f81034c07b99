package applier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

func TestLock(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "var/lib/tend")
	lockFile := statedir.Dir(stateDir).Lock()

	unlock, err := Lock(t.Context(), stateDir)
	require.NoError(t, err)
	require.Equal(t, statedir.Mode, perm(t, stateDir))
	pid, err := os.ReadFile(lockFile)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(os.Getpid()), strings.TrimSpace(string(pid)))

	t.Run("held lock times out naming the holder", func(t *testing.T) {
		start := time.Now() // before the deadline is set: a busy machine may pause between the two
		ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
		defer cancel()
		_, err := Lock(ctx, stateDir)
		require.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "Lock waits for ctx")
		var locked *LockedError
		require.True(t, errors.As(err, &locked))
		require.Equal(t, os.Getpid(), locked.PID)
		require.EqualError(t, err, fmt.Sprintf(
			"another tend (pid %d) is using %s (lock %s); wait for it to finish or stop it", os.Getpid(), stateDir, lockFile))
	})

	t.Run("waiter gets the lock once it is released", func(t *testing.T) {
		// The waiter is let go only after it found the lock held: it
		// cannot pass by taking a lock already free.
		waiting := make(chan struct{})
		var once sync.Once
		got := make(chan error, 1)
		go func() {
			unlock2, err := lock(t.Context(), stateDir, lockFile, false, func() { once.Do(func() { close(waiting) }) })
			if err == nil {
				err = unlock2()
			}
			got <- err
		}()
		select {
		case <-waiting:
		case err := <-got:
			t.Fatalf("the waiter returned while the lock was held: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter never found the lock held")
		}
		select {
		case err := <-got:
			t.Fatalf("the waiter returned while the lock was held: %v", err)
		default:
		}
		require.NoError(t, unlock())
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter did not get the lock within 30s of its release")
		}
	})

	t.Run("free lock is taken even with a done ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		unlock, err := Lock(ctx, stateDir)
		require.NoError(t, err)
		require.NoError(t, unlock())
	})
}
