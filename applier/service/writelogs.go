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

// LogOptions say which output Logs writes, and how.
type LogOptions struct {
	// Follow keeps writing what the replicas print until ctx ends.
	Follow bool
	// Previous writes the output of the last instance of each replica
	// that exited, instead of the current one's: the one before the
	// instance that runs, or the last one when none runs.
	Previous bool
}

// WriteLogs writes the output of a service's replicas (replica < 0: all of
// them; each line prefixed with its replica when there are several) to w,
// from their log files: each the current instance's. With follow it keeps
// writing what they append until ctx ends, and starts over on a file that
// was rotated or replaced (a new instance started).
func WriteLogs(ctx context.Context, w io.Writer, stateDir, name string, replica int, follow bool) error {
	return writeLogFiles(ctx, w, stateDir, name, replica, follow, false, nil)
}

// writeLogFiles is WriteLogs; with previous, it writes the output of the
// last instance of each replica that exited: the previous instance's file
// (see PreviousLog) of the replicas that run, the current one of the
// others.
func writeLogFiles(ctx context.Context, w io.Writer, stateDir, name string, replica int, follow, previous bool, running map[int]bool) error {
	dir := statedir.Dir(stateDir).Logs(name)
	file := func(r int) string {
		if previous && running[r] {
			return PreviousLog(LogFile(stateDir, name, r))
		}
		return LogFile(stateDir, name, r)
	}
	var replicas []int
	if replica >= 0 {
		if _, err := os.Stat(file(replica)); errors.Is(err, fs.ErrNotExist) {
			if previous && running[replica] {
				return fmt.Errorf("no logs of an earlier instance of %s replica %d in %s: it has not restarted since it started on this node (tend logs without --previous prints the one that runs)", planner.ServiceID(name), replica, dir)
			}
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
				if _, err := os.Stat(file(r)); err == nil {
					replicas = append(replicas, r)
				}
			}
		}
		slices.Sort(replicas)
	}
	if len(replicas) == 0 {
		if previous {
			return fmt.Errorf("no logs of an earlier instance of %s in %s: none has restarted since it started on this node (tend logs without --previous prints the ones that run)", planner.ServiceID(name), dir)
		}
		return fmt.Errorf("no logs for %s in %s: it has not run on this node", planner.ServiceID(name), dir)
	}
	tails := make([]*tail, len(replicas))
	for i, r := range replicas {
		tails[i] = &tail{path: file(r)}
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
	file         os.FileInfo // the file read last: another at path is read from its start
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
	if fi.Size() < t.offset || t.file != nil && !os.SameFile(t.file, fi) {
		t.offset = 0 // rotated: truncated in place, or replaced by a new instance's
	}
	t.file = fi
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

// LogSpan is the output of one instance of a replica: From's (nil: none
// started yet), up to where Next began, the instance started in From's
// place after it (nil when none was).
type LogSpan struct {
	From, Next Handle
}

// LogWriter is a Runtime that keeps its instances' output itself (a
// container engine) and writes it: the output of a service's replicas
// (replica < 0: all of them, each line prefixed with its replica when
// there are several; one span by replica) to w, with follow until ctx
// ends.
type LogWriter interface {
	WriteLogs(ctx context.Context, w io.Writer, name string, spans map[int]LogSpan, replica int, follow bool) error
}

// Logs writes the output of a service's replicas to w, each its current
// instance's or, with opts.Previous, its last exited instance's: through
// the runtime of its kind when that keeps the output (LogWriter), else
// from its log files in stateDir (see WriteLogs and PreviousLog).
func Logs(ctx context.Context, w io.Writer, rts *Runtimes, stateDir, name string, replica int, opts LogOptions) error {
	if opts.Previous && opts.Follow {
		return fmt.Errorf("logs of %s: --previous prints an instance that has ended: it cannot be followed (drop -f)", planner.ServiceID(name))
	}
	sup := &Supervisor{dir: statedir.Dir(stateDir).Services(), rts: rts}
	recs, err := sup.serviceRecords(name)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		rt, err := rts.Get(recs[0].Kind)
		if err != nil {
			return fmt.Errorf("logs of %s: %w", planner.ServiceID(name), err)
		}
		if lw, ok := rt.(LogWriter); ok {
			spans := make(map[int]LogSpan, len(recs))
			for _, r := range recs {
				if replica >= 0 && r.Instance.Replica != replica {
					continue
				}
				span := LogSpan{From: r.Proc}
				if opts.Previous && sup.alive(r) {
					if r.Prev == nil {
						if replica >= 0 {
							return fmt.Errorf("%s replica %d has not restarted since it started: no earlier instance to print (tend logs without --previous prints the one that runs)", planner.ServiceID(name), replica)
						}
						continue
					}
					span = LogSpan{From: r.Prev, Next: r.Proc}
				}
				spans[r.Instance.Replica] = span
			}
			if len(spans) == 0 && opts.Previous && replica < 0 {
				return fmt.Errorf("no replica of %s has restarted since it started: no earlier instance to print (tend logs without --previous prints the ones that run)", planner.ServiceID(name))
			}
			return lw.WriteLogs(ctx, w, name, spans, replica, opts.Follow)
		}
	}
	// The file of the instance that runs (or is being started) is its
	// own; one that ended (and was not replaced) left its output in it.
	running := map[int]bool{}
	for _, r := range recs {
		running[r.Instance.Replica] = opts.Previous && (r.Starting != nil || sup.alive(r))
	}
	return writeLogFiles(ctx, w, stateDir, name, replica, opts.Follow, opts.Previous, running)
}
