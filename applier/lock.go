package applier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/internal/statedir"
)

// lockPoll is how often Lock retries a lock held by another tend.
const lockPoll = 100 * time.Millisecond

// Lock takes the exclusive lock on stateDir (an flock on stateDir/lock,
// which then holds our pid), creating stateDir (statedir.Mode) if needed.
// While another process holds it, Lock retries every 100ms until ctx is
// done and then returns a *LockedError naming the holder's pid. The lock
// dies with the process, so a crash never leaves it stale.
func Lock(ctx context.Context, stateDir string) (unlock func() error, err error) {
	return lock(ctx, stateDir, statedir.Dir(stateDir).Lock(), false, nil)
}

// LockAgent takes the agent lock on stateDir for the life of the process:
// one agent per stateDir. It does not wait: a second agent fails at once
// with a *LockedError naming the first one's pid.
func LockAgent(stateDir string) (unlock func() error, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return lock(ctx, stateDir, statedir.Dir(stateDir).AgentLock(), true, nil)
}

// AgentRunning reports whether an agent holds the agent lock on stateDir
// (see LockAgent), with its pid when it wrote one. It writes nothing: it
// asks for the lock without waiting and lets it go at once (an agent
// starting in that instant fails as if another ran), and a stateDir
// without a lock file has no agent.
func AgentRunning(stateDir string) (pid int, running bool, err error) {
	name := statedir.Dir(stateDir).AgentLock()
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look for an agent on %s: %w", stateDir, err)
	}
	defer f.Close() // closing lets go of a lock taken here
	err = flock.Flock(f, flock.Exclusive|flock.NonBlocking)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return readPID(name), true, nil
	case err != nil:
		return 0, false, fmt.Errorf("look for an agent on %s: lock %s: %w", stateDir, name, err)
	}
	return 0, false, nil
}

// lock takes the flock on name; held, when not nil, is called each time
// the lock is found held by another (tests wait for it).
func lock(ctx context.Context, stateDir, name string, agent bool, held func()) (unlock func() error, err error) {
	if err := os.MkdirAll(stateDir, statedir.Mode); err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := flock.Flock(f, flock.Exclusive|flock.NonBlocking)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if held != nil {
			held()
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, &LockedError{PID: readPID(name), StateDir: stateDir, LockFile: name, Agent: agent}
		case <-t.C:
		}
	}
	if err := writePID(f); err != nil {
		_ = f.Close() // closing releases the lock
		return nil, fmt.Errorf("write pid to %s: %w", name, err)
	}
	return func() error {
		// Clear the pid first, so no one names us once we are gone.
		terr := f.Truncate(0)
		uerr := flock.Flock(f, flock.Unlock)
		cerr := f.Close()
		return errors.Join(terr, uerr, cerr)
	}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	// Not synced: the pid only names the holder in messages, and a power
	// cut ends the lock with its holder.
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readPID returns the pid written in the lock file, or 0.
func readPID(name string) int {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
