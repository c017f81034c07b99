package service

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// LimitKeeper is a Runtime that can read back the resource limits an
// instance runs under and put the declared ones back in place without
// restarting it: limits are desired state, and one changed by hand is
// drift.
type LimitKeeper interface {
	// LimitDrift says how the live limits of in's instance, whose handle is
	// h, differ from in.Spec's, one phrase each that says how RestoreLimits
	// puts it right ("memory limit 256Mi on node, 64Mi declared (rewritten
	// in place)", "pid 4242 left its memory cgroup (moved back)"); none when
	// they agree, or when the limits could not be applied on this node at
	// all (that stays the start's warning, not drift on every tick).
	LimitDrift(ctx context.Context, in Instance, h Handle) []string
	// RestoreLimits writes in.Spec's limits back for h's instance, moving a
	// process that left its cgroup back in. An error says it could not;
	// the instance is then started again.
	RestoreLimits(ctx context.Context, in Instance, h Handle) error
}

// LimitDrift returns, by replica, how the live limits of a service's
// running instances differ from those declared (see LimitKeeper): none for
// a runtime that cannot read limits back, or an instance not running.
func (s *Supervisor) LimitDrift(ctx context.Context, name string) (map[int][]string, error) {
	recs, err := s.serviceRecords(name)
	if err != nil {
		return nil, err
	}
	var out map[int][]string
	for _, r := range recs {
		if r.Proc == nil || !s.alive(r) {
			continue
		}
		lk, ok := s.limitKeeper(r.Kind)
		if !ok {
			continue
		}
		if d := lk.LimitDrift(ctx, r.Instance, r.Proc); len(d) > 0 {
			if out == nil {
				out = map[int][]string{}
			}
			out[r.Instance.Replica] = d
		}
	}
	return out, nil
}

func (s *Supervisor) limitKeeper(kind string) (LimitKeeper, bool) {
	rt, err := s.rts.Get(kind)
	if err != nil {
		return nil, false
	}
	lk, ok := rt.(LimitKeeper)
	return lk, ok
}

// RestoreLimits puts the declared limits of a running replica back in
// place (see LimitKeeper). An error means they could not be: the caller
// starts the replica again.
func (s *Supervisor) RestoreLimits(ctx context.Context, name string, replica int) error {
	recs, err := s.serviceRecords(name)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Instance.Replica != replica || r.Proc == nil {
			continue
		}
		lk, ok := s.limitKeeper(r.Kind)
		if !ok {
			return fmt.Errorf("the %s runtime cannot set limits in place", r.Kind)
		}
		return lk.RestoreLimits(ctx, r.Instance, r.Proc)
	}
	return fmt.Errorf("replica %d of %s has no record", replica, name)
}

// limitNote is the drift note of replicas whose limits drifted:
// "replica 0: memory limit 256Mi on node, 64Mi declared (rewritten in
// place)", each phrase the runtime's, saying how it is put right.
func limitNote(drift map[int][]string) string {
	var parts []string
	for _, i := range slices.Sorted(maps.Keys(drift)) {
		parts = append(parts, fmt.Sprintf("replica %d: %s", i, strings.Join(drift[i], ", ")))
	}
	return summarise(parts)
}

// LimitsAsDeclared is the value of a service's limits field when its
// instances run under the limits declared (see planner.FieldLimits): the
// empty value, so that a record written before the field existed agrees.
const LimitsAsDeclared = ""
