package applier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tend-dev/tend/planner"
)

// Undoer is a driver that can say, before an action runs, how to put its
// resource back as it is now. The applier rolls a plan back with these
// when a service it started or restarted does not become healthy.
type Undoer interface {
	Undo(ctx context.Context, a planner.Action) (func(context.Context) error, error)
}

var (
	_ Undoer = (*FileDriver)(nil)
	_ Undoer = (*ModelDriver)(nil)
	_ Undoer = (*ServiceDriver)(nil)
)

// RollbackError says a plan was rolled back: a service did not become
// healthy after the update, and every action the plan had applied was
// undone, so the node runs what it ran before.
type RollbackError struct {
	Revision   string   // the revision that was rolled back
	Failed     string   // the resource whose failure caused it
	Cause      error    // why it failed
	RolledBack []string // the resources put back, in the order they were
	Undo       error    // what went wrong while rolling back, if anything
}

func (e *RollbackError) Error() string {
	s := fmt.Sprintf("%s did not become healthy: %v; rolled back %s to what ran before %s",
		e.Failed, e.Cause, strings.Join(e.RolledBack, ", "), e.Revision)
	if e.Undo != nil {
		s += fmt.Sprintf(" (rollback incomplete: %v)", e.Undo)
	}
	return s
}

func (e *RollbackError) Unwrap() error { return e.Cause }

// undoStep is how to put one resource back.
type undoStep struct {
	id      string
	service bool
	run     func(context.Context) error
}

// rollback runs the undo steps: everything but services in reverse order,
// then services, so they restart onto the models and files put back.
func rollback(ctx context.Context, steps []undoStep) ([]string, error) {
	var done []string
	var errs []error
	run := func(s undoStep) {
		if err := s.run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.id, err))
			return
		}
		done = append(done, s.id)
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if !steps[i].service {
			run(steps[i])
		}
	}
	for _, s := range steps {
		if s.service {
			run(s)
		}
	}
	return done, errors.Join(errs...)
}

// shouldRollBack reports whether a failed action calls for a rollback: a
// service that did not start or did not become healthy. Other failures
// (a file that cannot be written) stop the plan where it is, as before.
func shouldRollBack(act planner.Action, err error) bool {
	return act.Kind == planner.KindService && act.Type != planner.Delete && err != nil
}

// rollbackTimeout bounds a rollback, which ignores the tick's cancellation:
// a process stuck in the kernel must not hold the lock for ever.
const rollbackTimeout = 2 * time.Minute

// Undo reads the file as it is: the undo writes it back, or removes the
// file the action creates. Anything but a regular file is left alone.
func (d *FileDriver) Undo(_ context.Context, a planner.Action) (func(context.Context) error, error) {
	allow, rel, err := d.locate(a.Resource)
	if err != nil {
		return nil, err
	}
	dir, err := d.openAllowed(allow, false)
	if errors.Is(err, fs.ErrNotExist) {
		return func(context.Context) error { return confined(allow, d.remove(allow, rel)) }, nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fi, err := dir.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return func(context.Context) error { return confined(allow, d.remove(allow, rel)) }, nil
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, nil
	}
	data, err := dir.ReadFile(rel)
	if err != nil {
		return nil, err
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	return func(context.Context) error { return confined(allow, d.write(allow, rel, data, mode)) }, nil
}

// Undo notes where the model's link points: the undo points it there
// again (that version is kept until the plan has held), or removes the
// link the action creates.
func (d *ModelDriver) Undo(_ context.Context, a planner.Action) (func(context.Context) error, error) {
	if a.Type == planner.Delete {
		return nil, nil // a removed model is pulled again by the next tick
	}
	name := ModelName(a.Resource)
	d.mu.Lock()
	w := d.wanted[name]
	d.mu.Unlock()
	if w == nil {
		return nil, nil
	}
	rec, err := d.record(name)
	if err != nil {
		return nil, err
	}
	var before *modelRecord
	if rec != nil {
		c := *rec
		c.Versions = append([]modelVersion(nil), rec.Versions...)
		before = &c
	}
	dir, rel, err := d.linkDir(name, w.spec.Path, false)
	target := ""
	if err == nil {
		target, _ = dir.Readlink(rel)
		_ = dir.Close()
	}
	return func(context.Context) error {
		dir, rel, err := d.linkDir(name, w.spec.Path, true)
		if err != nil {
			return err
		}
		defer dir.Close()
		if target == "" {
			if err := dir.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		} else if err := swapLink(dir, rel, target); err != nil {
			return err
		}
		if before == nil {
			return nil
		}
		// Keep the versions pulled since: a retry needs no download.
		cur, err := d.record(name)
		if err == nil && cur != nil {
			for _, v := range cur.Versions {
				if before.version(v.Dir) == nil {
					before.Versions = append(before.Versions, v)
				}
			}
		}
		return d.setRecord(before)
	}, nil
}

// Undo notes the instances running now: the undo starts each again from
// its old spec (onto the models and files put back before it) and stops
// the replicas the action added.
func (d *ServiceDriver) Undo(ctx context.Context, a planner.Action) (func(context.Context) error, error) {
	name := ServiceName(a.Resource)
	old, err := d.sup.serviceRecords(name)
	if err != nil {
		return nil, err
	}
	rec, err := d.record(name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		now, err := d.sup.serviceRecords(name)
		if err != nil {
			return err
		}
		current := map[int]instanceRecord{}
		for _, n := range now {
			current[n.Instance.Replica] = n
		}
		was := map[int]bool{}
		for _, o := range old {
			was[o.Instance.Replica] = true
			if n, ok := current[o.Instance.Replica]; ok && n.Proc == o.Proc && n.SpecHash == o.SpecHash {
				continue // never touched by the plan: still on the old inputs
			}
			if _, err := d.sup.Run(ctx, o.Instance, o.SpecHash, o.Policy, DefaultStopTimeout, o.Probe); err != nil {
				return err
			}
		}
		for _, n := range now {
			if !was[n.Instance.Replica] {
				if err := d.sup.Halt(ctx, name, n.Instance.Replica, DefaultStopTimeout); err != nil {
					return err
				}
			}
		}
		if rec == nil {
			return os.RemoveAll(filepath.Join(d.sup.dir, name))
		}
		return d.saveRecord(name, *rec)
	}, nil
}
