package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/statedir"
)

// instanceRecord is what is kept on disk about one running instance.
type instanceRecord struct {
	// Kind is the kind of runtime that runs it.
	Kind     string
	Instance Instance
	// Proc is its runtime's handle; nil while it is being started.
	Proc Handle
	// Prev is the handle of the instance that ran before Proc, in its
	// place (see Supervisor.Previous); nil when none did.
	Prev Handle
	recordState
}

// recordState is what the supervisor keeps about an instance besides its
// spec and its handle.
type recordState struct {
	SpecHash  string    `json:"specHash"`
	Policy    string    `json:"restart"`
	StartedAt time.Time `json:"startedAt"`
	Restarts  int       `json:"restarts"`
	Crashes   int       `json:"crashes"` // quick exits in a row
	LastExit  string    `json:"lastExit,omitempty"`
	// LastExitAt is when the last exit happened (the runtime's time for
	// it when it has one).
	LastExitAt time.Time `json:"lastExitAt,omitzero"`
	CleanExit  bool      `json:"cleanExit,omitempty"` // the last exit was a clean exit 0
	// Removed: the instance was removed outside tend while watched (a
	// container removed by hand); drift for the next tick, whatever its
	// restart policy.
	Removed bool `json:"removed,omitempty"`
	// BootID is the kernel's boot id when the process started: after a
	// reboot, a pid and start time can match another process.
	BootID string `json:"bootID,omitempty"`
	// Probe, when the service has one, is checked every interval while
	// the agent watches: failureThreshold failures in a row restart it.
	Probe *Probe `json:"probe,omitempty"`
	// Inputs are what the resources the service depends on were declared
	// as when this instance started (see render.Service.Inputs); nil in a
	// record of an older tend.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Starting, when set, says the instance was being started then and
	// its process is not known: tend died between the start and this
	// record. What it started is found and stopped (see sweep).
	Starting *time.Time `json:"starting,omitempty"`
}

// diskRecord is an instanceRecord as its file holds it: the instance's
// spec fields beside its service, replica and invocation, and the
// runtime's handle, both as the runtime encodes them.
type diskRecord struct {
	Kind     string          `json:"kind,omitempty"`
	Instance json.RawMessage `json:"instance"`
	Proc     json.RawMessage `json:"proc"`
	Prev     json.RawMessage `json:"previous,omitempty"`
	recordState
}

// instanceHead is what the core reads of an instance's JSON.
type instanceHead struct {
	Service    string
	Replica    int
	Invocation string `json:",omitempty"`
}

// encodeInstance writes in as one JSON object: its spec's fields, and its
// Service, Replica and Invocation.
func encodeInstance(in Instance) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if in.Spec != nil {
		if raw, ok := in.Spec.(rawSpec); ok {
			if err := json.Unmarshal(raw.raw, &fields); err != nil {
				return nil, err
			}
		} else {
			b, err := json.Marshal(in.Spec)
			if err != nil {
				return nil, fmt.Errorf("encode the spec of %s replica %d: %w", in.Service, in.Replica, err)
			}
			if err := json.Unmarshal(b, &fields); err != nil {
				return nil, fmt.Errorf("the spec of %s replica %d is not a JSON object: %w", in.Service, in.Replica, err)
			}
		}
	}
	head, _ := json.Marshal(instanceHead{in.Service, in.Replica, in.Invocation})
	var hf map[string]json.RawMessage
	_ = json.Unmarshal(head, &hf)
	delete(fields, "Invocation")
	maps.Copy(fields, hf)
	return json.Marshal(fields)
}

func (r instanceRecord) MarshalJSON() ([]byte, error) {
	in, err := encodeInstance(r.Instance)
	if err != nil {
		return nil, err
	}
	proc := json.RawMessage("null")
	if r.Proc != nil {
		if proc, err = json.Marshal(r.Proc); err != nil {
			return nil, err
		}
	}
	var prev json.RawMessage
	if r.Prev != nil {
		if prev, err = json.Marshal(r.Prev); err != nil {
			return nil, err
		}
	}
	return json.Marshal(diskRecord{Kind: r.Kind, Instance: in, Proc: proc, Prev: prev, recordState: r.recordState})
}

// decode reads a record's file through the runtime of its kind. A kind
// this node has no runtime for keeps its spec and handle as they are
// written, and its handle is not alive.
func (d diskRecord) decode(rts *Runtimes) (instanceRecord, error) {
	var head instanceHead
	if err := json.Unmarshal(d.Instance, &head); err != nil {
		return instanceRecord{}, fmt.Errorf("instance: %w", err)
	}
	r := instanceRecord{Kind: d.Kind, recordState: d.recordState,
		Instance: Instance{Service: head.Service, Replica: head.Replica, Invocation: head.Invocation}}
	if r.Kind == "" {
		r.Kind = legacyKind(d.Instance)
	}
	rt, err := rts.Get(r.Kind)
	if err != nil {
		r.Instance.Spec = rawSpec{kind: r.Kind, raw: d.Instance}
		if !isNull(d.Proc) {
			r.Proc = missingHandle{raw: d.Proc, err: err}
		}
		if !isNull(d.Prev) {
			r.Prev = missingHandle{raw: d.Prev, err: err}
		}
		return r, nil
	}
	if r.Instance.Spec, err = rt.DecodeSpec(d.Instance); err != nil {
		return instanceRecord{}, fmt.Errorf("%s spec: %w", r.Kind, err)
	}
	if !isNull(d.Proc) {
		if r.Proc, err = rt.Recover(d.Proc); err != nil {
			return instanceRecord{}, fmt.Errorf("%s handle: %w", r.Kind, err)
		}
	}
	if !isNull(d.Prev) {
		if r.Prev, err = rt.Recover(d.Prev); err != nil {
			return instanceRecord{}, fmt.Errorf("%s handle of the previous instance: %w", r.Kind, err)
		}
	}
	return r, nil
}

// legacyKind is the kind of a record written before records named their
// runtime: the two runtimes there were then, told apart by the image a
// container's instance names.
func legacyKind(instance json.RawMessage) string {
	var in struct{ Image string }
	if json.Unmarshal(instance, &in) == nil && in.Image != "" {
		return "container"
	}
	return "process"
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// rawSpec is the spec of a record whose kind this node has no runtime
// for, kept as it was written.
type rawSpec struct {
	kind string
	raw  json.RawMessage
}

func (s rawSpec) Kind() string { return s.kind }

// missingHandle is the handle of a record whose kind this node has no
// runtime for: not alive, and what is asked of it fails with why.
type missingHandle struct {
	raw json.RawMessage
	err error
}

func (h missingHandle) ID() string                                { return string(h.raw) }
func (h missingHandle) PID() int                                  { return 0 }
func (h missingHandle) Alive() bool                               { return false }
func (h missingHandle) Wait(context.Context) (ExitStatus, error)  { return ExitStatus{}, h.err }
func (h missingHandle) Stop(context.Context, time.Duration) error { return h.err }
func (h missingHandle) MarshalJSON() ([]byte, error)              { return h.raw, nil }

func (s *Supervisor) recordPath(k instanceKey) string {
	return s.dir.Instance(k.service, k.replica)
}

func (s *Supervisor) readRecord(k instanceKey) (*instanceRecord, error) {
	var d diskRecord
	found, err := statedir.ReadJSON(s.recordPath(k), &d)
	if errors.Is(err, atomicfile.ErrCorrupt) {
		return nil, fmt.Errorf("%w; stop the process by hand and remove the file", err)
	}
	if err != nil || !found {
		return nil, err
	}
	r, err := d.decode(s.rts)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w; stop the instance by hand and remove the file", s.recordPath(k), err)
	}
	return &r, nil
}

func (s *Supervisor) writeRecord(r instanceRecord) error {
	// A record holds the service's environment, which may hold secrets:
	// readable by tend alone.
	file := s.recordPath(instanceKey{r.Instance.Service, r.Instance.Replica})
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return statedir.WriteJSON(filepath.Dir(file), filepath.Base(file), r, 0o600)
}

// serviceRecords reads the instance records of one service, by replica.
func (s *Supervisor) serviceRecords(name string) ([]instanceRecord, error) {
	entries, err := os.ReadDir(s.dir.Service(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	for _, e := range entries {
		replica, ok := statedir.InstanceReplica(e.Name())
		if !ok {
			continue
		}
		r, err := s.readRecord(instanceKey{name, replica})
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b instanceRecord) int { return a.Instance.Replica - b.Instance.Replica })
	return out, nil
}

// records reads every instance record.
func (s *Supervisor) records() ([]instanceRecord, error) {
	entries, err := os.ReadDir(string(s.dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			recs, err := s.serviceRecords(e.Name())
			errs = append(errs, err)
			out = append(out, recs...)
		}
	}
	return out, errors.Join(errs...)
}
