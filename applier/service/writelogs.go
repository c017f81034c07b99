package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
)

// followPoll is how often WriteLogs looks for new output when following.
const followPoll = 250 * time.Millisecond

// WriteLogs writes the output of a service's replicas (replica < 0: all of
// them; each line prefixed with its replica when there are several) to w.
// With follow it keeps writing what they append until ctx ends, and starts
// over on a file that was rotated.
func WriteLogs(ctx context.Context, w io.Writer, stateDir, name string, replica int, follow bool) error {
	dir := statedir.Dir(stateDir).Logs(name)
	var replicas []int
	if replica >= 0 {
		if _, err := os.Stat(LogFile(stateDir, name, replica)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no logs for %s replica %d in %s: it has not run on this node", planner.ServiceID(name), replica, dir)
		}
		replicas = []int{replica}
	} else {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no logs for %s in %s: it has not run on this node", planner.ServiceID(name), dir)
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if r, ok := statedir.LogReplica(e.Name()); ok {
				replicas = append(replicas, r)
			}
		}
		slices.Sort(replicas)
	}
	if len(replicas) == 0 {
		return fmt.Errorf("no logs for %s in %s: it has not run on this node", planner.ServiceID(name), dir)
	}
	tails := make([]*tail, len(replicas))
	for i, r := range replicas {
		tails[i] = &tail{path: LogFile(stateDir, name, r)}
		if len(replicas) > 1 {
			tails[i].prefix = fmt.Sprintf("replica %d | ", r)
		}
	}
	for {
		for _, t := range tails {
			if err := t.copy(w, !follow); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// tail reads a log file from where it last stopped.
type tail struct {
	path, prefix string
	offset       int64
}

// copy writes the whole lines added since the last call; with partial,
// a last line without its newline too (the end of a one-shot read).
func (t *tail) copy(w io.Writer, partial bool) error {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < t.offset {
		t.offset = 0 // rotated: truncated in place
	}
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if !strings.HasSuffix(line, "\n") {
			if partial && line != "" {
				_, werr := io.WriteString(w, t.prefix+line+"\n")
				return werr
			}
			return nil // a partial line waits for its end
		}
		t.offset += int64(len(line))
		if _, werr := io.WriteString(w, t.prefix+line); werr != nil {
			return werr
		}
		if err != nil {
			return nil
		}
	}
}

// LogWriter is a Runtime that keeps its instances' output itself (a
// container engine) and writes it: the output of a service's replicas
// (replica < 0: all of them, each line prefixed with its replica when
// there are several; handles by replica, nil for one not started yet) to
// w, with follow until ctx ends.
type LogWriter interface {
	WriteLogs(ctx context.Context, w io.Writer, name string, handles map[int]Handle, replica int, follow bool) error
}

// Logs writes the output of a service's replicas to w (see WriteLogs):
// through the runtime of its kind when that keeps the output (LogWriter),
// else from its log files in stateDir.
func Logs(ctx context.Context, w io.Writer, rts *Runtimes, stateDir, name string, replica int, follow bool) error {
	recs, err := (&Supervisor{dir: statedir.Dir(stateDir).Services(), rts: rts}).serviceRecords(name)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		rt, err := rts.Get(recs[0].Kind)
		if err != nil {
			return fmt.Errorf("logs of %s: %w", planner.ServiceID(name), err)
		}
		if lw, ok := rt.(LogWriter); ok {
			handles := make(map[int]Handle, len(recs))
			for _, r := range recs {
				handles[r.Instance.Replica] = r.Proc
			}
			return lw.WriteLogs(ctx, w, name, handles, replica, follow)
		}
	}
	return WriteLogs(ctx, w, stateDir, name, replica, follow)
}
