package hub

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// maxWave bounds the wave a report may name, as a verdict's before.
const maxWave = 1 << 20

// Placement is where a device stands in the fleet's rollouts when a
// report of it is taken: the rollout that governs it and its wave there.
type Placement struct {
	Rollout string // "" in none, or not said
	Wave    int    // rollout.NoWave: in none, or not known
	// Checked says the hub worked it out from the fleet repo
	// (--fleet-source). Otherwise it is what the device reported, and the
	// first wave and rollout a device reported for a release are kept
	// for it (trust on first use).
	Checked bool
}

// checkLists bounds the lists of a report (see api.MaxReportResources).
func checkLists(s *api.Status) error {
	for _, l := range []struct {
		name string
		n    int
		max  int
	}{
		{"quarantined", len(s.Quarantined), api.MaxReportQuarantined},
		{"resources", len(s.Resources), api.MaxReportResources},
		{"services", len(s.Services), api.MaxReportResources},
	} {
		if l.n > l.max {
			return fmt.Errorf("%s lists %d entries, more than %d a report may: a tend of this hub's version posts at most that", l.name, l.n, l.max)
		}
	}
	return nil
}

// reported is where s says its device stands: its wave (or the one its
// hold names) and rollout. A wave out of bounds is an error.
func reported(s *api.Status) (Placement, error) {
	if s.Wave != nil && (*s.Wave > maxWave || *s.Wave < rollout.NoWave) {
		return Placement{}, fmt.Errorf("wave %d: a wave is from %d (none) to %d", *s.Wave, rollout.NoWave, maxWave)
	}
	if len(s.Rollout) > maxRolloutBytes {
		return Placement{}, fmt.Errorf("rollout: %d bytes, more than %d: a Rollout's metadata.name", len(s.Rollout), maxRolloutBytes)
	}
	return Placement{Rollout: s.Rollout, Wave: deviceWave(s)}, nil
}

// maxRolloutBytes bounds the rollout's name a report carries.
const maxRolloutBytes = 253

// agrees reports whether what s says of its device's place agrees with
// p, worked out by the hub: a wave or a rollout it reports that differs
// does not (one it does not report is no disagreement).
func (p Placement) agrees(s *api.Status) bool {
	return (s.Wave == nil || max(*s.Wave, rollout.NoWave) == p.Wave) && (s.Rollout == "" || s.Rollout == p.Rollout)
}

// Fleet is the fleet repo as the hub reads it with --fleet-source: each
// device's labels from its Device documents and the Rollouts, from which
// Place works out where a device stands. Safe for concurrent use; Update
// swaps what it knows at once.
type Fleet struct {
	mu       sync.RWMutex
	revision string // "" before the first Update
	labels   map[string]map[string]string
	rollouts []*manifest.Rollout
}

// Update has f know the fleet as fl says at revision.
func (f *Fleet) Update(revision string, fl *manifest.FleetLabels) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision, f.labels, f.rollouts = revision, fl.Labels, fl.Rollouts
}

// Revision is the fleet revision f knows; "" before the first Update.
func (f *Fleet) Revision() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.revision
}

// Place works out where device stands, labelled by its Device documents
// over enrolled (the labels the hub trusts for it from elsewhere; nil
// for none), as its agent would: the one Rollout whose selector matches,
// and its wave there. A device two rollouts select is in none. ok is
// false before f knows the fleet.
func (f *Fleet) Place(device string, enrolled map[string]string) (p Placement, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.revision == "" {
		return Placement{}, false
	}
	labels := maps.Clone(enrolled)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, f.labels[device])
	p = Placement{Wave: rollout.NoWave, Checked: true}
	r, err := manifest.RolloutOf(f.rollouts, labels)
	if err != nil || r == nil {
		return p, true
	}
	p.Rollout = r.Metadata.Name
	p.Wave, _ = rollout.Wave(device, labels, r)
	return p, true
}

// partIn is the wave and rollout of a device's part in release key, in
// state, at its report st with keys k, where the device stands at p;
// old is the part as recorded (known says whether it was).
//
// The device's wave counts for the release it works towards (while it
// waits: a hold's reason names a wave only then), for one it rolled back
// before any report named it, and for a commit it ran that changed
// nothing on it. A part keeps the wave and rollout it was first recorded
// at unless p was checked: a device cannot move a release it took part
// in to another wave or rollout by saying so.
func (p Placement) partIn(old part, known bool, key api.ReleaseKey, state string, st *api.Status, k keys) (int, string) {
	if p.Checked {
		return p.Wave, p.Rollout // where the fleet repo puts the device now, for every release
	}
	w, ro := old.wave, old.rollout
	if !known {
		w, ro = rollout.NoWave, ""
	}
	says := p.Checked || st.Wave != nil // the wave is the device's, not a hold's
	switch {
	case p.Wave < 0 && !p.Checked:
		return w, ro
	case key == k.target && (state != StateApplied || says):
	case w < 0 && says && state == StateFailed: // rolled back at once, before any report named it
	case w < 0 && says && k.ranOnly(key): // a commit that changed nothing here, run in this wave
	default:
		return w, ro
	}
	if known && !p.Checked && w >= 0 {
		if ro == "" {
			ro = p.Rollout // recorded before the hub kept rollouts (schema 3)
		}
		return w, ro // the first wave reported for it stays
	}
	return p.Wave, p.Rollout
}

// FleetSource is how the hub reads the fleet repo for --fleet-source.
type FleetSource struct {
	Fetcher source.Fetcher
	Dirs    []string // the folders read (see manifest.AgentConfig.FleetDirs)
	Timeout time.Duration
	Every   time.Duration // between two reads
	Log     *slog.Logger
}

// Watch reads the fleet into f now and then every fs.Every until ctx
// ends. A read that fails, or a fleet whose files have problems, leaves
// f as it was, logged: the hub keeps the last fleet it read in full.
func (fs FleetSource) Watch(ctx context.Context, f *Fleet) {
	for {
		fs.read(ctx, f)
		select {
		case <-ctx.Done():
			return
		case <-time.After(fs.Every):
		}
	}
}

func (fs FleetSource) read(ctx context.Context, f *Fleet) {
	ctx, cancel := context.WithTimeout(ctx, fs.Timeout)
	defer cancel()
	paths := make([]source.Path, len(fs.Dirs))
	for i, d := range fs.Dirs {
		paths[i] = source.Path{Dir: d}
	}
	snap, err := fs.Fetcher.Fetch(ctx, source.Request{Paths: paths, AllowRewind: true})
	if err == nil && snap.Stale != nil {
		err = snap.Stale
	}
	if err != nil {
		fs.Log.Error("fleet source: not read; the hub keeps the fleet it read last", "revision", f.Revision(), keyError, err.Error())
		return
	}
	rev := snap.Revision.String()
	if rev == f.Revision() {
		return
	}
	inputs := make([]manifest.Input, len(snap.Files))
	for i, file := range snap.Files {
		inputs[i] = manifest.Input{Name: file.Path, Data: file.Data}
	}
	fl, err := manifest.ReadFleetLabels(inputs)
	if err != nil {
		fs.Log.Error("fleet source: "+rev+" has problems; the hub keeps the fleet it read last", "revision", f.Revision(), keyError, err.Error())
		return
	}
	f.Update(rev, fl)
	fs.Log.Info("fleet source read", "revision", rev, "devices", len(fl.Labels), "rollouts", len(fl.Rollouts))
}

// partsPlace is where a device stands for its parts in releases (see
// parts.go): at p, or, for a part it takes part in for the first time,
// at the wave and rollout its part in a release of that part was first
// recorded at (see Placement.partIn).
type partsPlace struct {
	Placement
	placed map[api.ReleaseKey]part
	seen   map[api.ReleaseKey]int64 // when each of placed was first recorded; absent: now
}

// forParts is p for the parts of the releases placed, the device's part
// in each release its report named, first recorded at seen.
func (p Placement) forParts(placed map[api.ReleaseKey]part, seen map[api.ReleaseKey]int64) partsPlace {
	return partsPlace{Placement: p, placed: placed, seen: seen}
}

// first is the wave and rollout of part dp's first record: those of the
// release of it recorded first in a wave (not the lowest wave: a device
// cannot lower its part by naming a new key that holds it); else p's.
func (pp partsPlace) first(dp string) (int, string) {
	if pp.Checked {
		return pp.Wave, pp.Rollout
	}
	w, ro := rollout.NoWave, ""
	var firstKey api.ReleaseKey
	var firstSeen int64
	for key, rp := range pp.placed {
		if rp.state == StateTrimmed || rp.wave < 0 || !slices.Contains(keyParts(key), dp) {
			continue
		}
		s, ok := pp.seen[key]
		if !ok {
			s = math.MaxInt64 // recorded by this report: after any before it
		}
		if w < 0 || s < firstSeen || s == firstSeen && key < firstKey {
			w, ro, firstKey, firstSeen = rp.wave, rp.rollout, key, s
		}
	}
	if w < 0 {
		return pp.Wave, pp.Rollout
	}
	return w, ro
}

// trimmed reports whether part dp is a part only of releases whose
// device's part was trimmed (see trimReleases): a failure of it is no
// longer kept.
func (pp partsPlace) trimmed(dp string) bool {
	in := false
	for key, rp := range pp.placed {
		if slices.Contains(keyParts(key), dp) {
			if rp.state != StateTrimmed {
				return false
			}
			in = true
		}
	}
	return in
}
