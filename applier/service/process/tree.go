//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the search for what a service left outside its process group.
const (
	maxProcScan = 1 << 16 // processes one read of /proc looks at
	maxTree     = 4096    // descendants one Stop kills
	treeRounds  = 5       // reads of /proc at the kill, for processes forked meanwhile
	treeExit    = time.Second
)

// procLink is what the stop path reads of one process in /proc.
type procLink struct {
	ppid, session int
	start         uint64
}

// scanProcs reads the parent, session and start time of the processes in
// /proc, zombies left out, up to maxProcScan of them.
func scanProcs() (map[int]procLink, error) {
	mounted, err := procFS()
	if err != nil {
		return nil, err
	}
	dir, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	defer dir.Close()
	out := map[int]procLink{}
	for seen := 0; seen < maxProcScan; {
		names, err := dir.Readdirnames(min(1024, maxProcScan-seen))
		for _, n := range names {
			pid, perr := strconv.Atoi(n)
			if perr != nil {
				continue
			}
			seen++
			p, perr := mounted.Proc(pid)
			if perr != nil {
				continue
			}
			st, perr := p.Stat()
			if perr != nil || st.State == "Z" || st.State == "X" {
				continue
			}
			out[pid] = procLink{ppid: st.PPID, session: st.Session, start: st.Starttime}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list /proc: %w", err)
		}
	}
	return out, nil
}

// descendants finds in procs every process below roots by parent links,
// and every process in the session leader leads, at most maxTree of them.
// A root counts only while it runs with its start time, so a pid the
// kernel gave to another process leads nowhere. Roots, and tend itself,
// are left out.
func descendants(procs map[int]procLink, leader Proc, roots []Proc) []Proc {
	children := map[int][]int{}
	for pid, l := range procs {
		children[l.ppid] = append(children[l.ppid], pid)
	}
	seen := map[int]bool{os.Getpid(): true, leader.PID: true}
	for _, r := range roots {
		seen[r.PID] = true
	}
	var out []Proc
	add := func(pid int) bool {
		if seen[pid] || len(out) == maxTree {
			return false
		}
		seen[pid] = true
		out = append(out, Proc{PID: pid, StartTime: procs[pid].start})
		return true
	}
	var queue []int
	for _, r := range append([]Proc{leader}, roots...) {
		if l, ok := procs[r.PID]; ok && l.start == r.StartTime {
			queue = append(queue, r.PID)
		}
	}
	if l, ok := procs[leader.PID]; ok && l.start == leader.StartTime {
		for pid, l := range procs {
			if l.session == leader.PID && add(pid) {
				queue = append(queue, pid)
			}
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if add(c) {
				queue = append(queue, c)
			}
		}
	}
	return out
}

// tree is what a service runs outside its leader: its descendants and
// its session, read before Stop signals anything, while parent links
// still lead from the leader (a process whose parent exits is given to
// init, and no link leads to it any more).
func (e *Runtime) tree(p Proc) []Proc {
	procs, err := scanProcs()
	if err != nil {
		e.log.Warn("read /proc for the service's descendants", logKeyPID, p.PID, logKeyError, err)
		return nil
	}
	return descendants(procs, p, nil)
}

// frozen is a service's processes outside its leader, stopped (SIGSTOP)
// until kill.
type frozen struct {
	procs []frozenProc
}

type frozenProc struct {
	p Proc
	f *os.File // its pidfd; nil on a kernel without pidfd_open
}

func (fp frozenProc) signal(sig unix.Signal) error {
	if fp.f != nil {
		return pidfdSignal(fp.f, sig)
	}
	if !procAlive(fp.p) {
		return errGone
	}
	return unix.Kill(fp.p.PID, sig)
}

// freezeTree stops every process of the tree before (see tree) that still
// runs, and what descends from them or from the leader now, with SIGSTOP,
// so that none forks or exits and loses its children's links: round by
// round, until a read of /proc finds nothing new (at most treeRounds
// reads, maxTree processes).
func (e *Runtime) freezeTree(p Proc, before []Proc) *frozen {
	t := &frozen{}
	roots := slices.Clone(before)
	seen := map[Proc]bool{}
	for range treeRounds {
		procs, err := scanProcs()
		if err != nil {
			e.log.Warn("read /proc for the service's descendants", logKeyPID, p.PID, logKeyError, err)
			break
		}
		found := 0
		for _, d := range append(slices.Clone(roots), descendants(procs, p, roots)...) {
			if seen[d] || len(t.procs) == maxTree {
				continue
			}
			seen[d] = true
			fp := frozenProc{p: d}
			f, err := openPidfd(d)
			switch {
			case errors.Is(err, unix.ENOSYS):
			case err != nil:
				if !errors.Is(err, errGone) {
					e.log.Debug("descendant of the service not stopped", logKeyPID, d.PID, logKeyError, err)
				}
				continue
			default:
				fp.f = f
			}
			if err := fp.signal(unix.SIGSTOP); err != nil {
				fp.close()
				continue
			}
			t.procs = append(t.procs, fp)
			roots = append(roots, d)
			found++
		}
		if found == 0 {
			break
		}
	}
	return t
}

func (fp frozenProc) close() {
	if fp.f != nil {
		_ = fp.f.Close()
	}
}

// kill kills the frozen processes (SIGKILL) and waits, up to treeExit, for
// them to be gone.
func (t *frozen) kill(ctx context.Context) error {
	defer func() {
		for _, fp := range t.procs {
			fp.close()
		}
	}()
	for _, fp := range t.procs {
		_ = fp.signal(unix.SIGKILL)
	}
	ctx, cancel := context.WithTimeout(ctx, treeExit)
	defer cancel()
	for _, fp := range t.procs {
		var err error
		if fp.f != nil {
			err = waitPidfd(ctx, fp.f)
		} else {
			err = waitGoneByPolling(ctx, fp.p)
		}
		if err != nil {
			return fmt.Errorf("pid %d, outside the service's process group, still runs after SIGKILL: %w", fp.p.PID, err)
		}
	}
	return nil
}
