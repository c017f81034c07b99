package diff

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/source"
)

// RolloutChange is a Rollout document that differs between base and head
// (a commit that pauses a rollout, narrows its selector, moves its waves,
// window, gate, stage or brakes), and the inventory devices it governs. Such a
// change alone changes no device's plan; it changes when each device
// takes the next release.
type RolloutChange struct {
	Name   string `json:"rollout"` // rollout/NAME
	Change string `json:"change"`  // added, removed or changed
	// Fields are what changed in its spec, base to head, among paused,
	// selector, waves, window, gate, stage and brakes (a changed rollout
	// only).
	Fields []planner.Change `json:"fields,omitempty"`
	// Devices are the inventory devices it governs at head; for a removed
	// rollout, those it governed at base.
	Devices []string `json:"devices"`
	// Joined are the devices of Devices it did not govern at base, and
	// Left those it governed at base and no longer governs (a changed
	// rollout whose selector, or whose devices' labels, changed).
	Joined []string `json:"joined,omitempty"`
	Left   []string `json:"left,omitempty"`
}

// rolloutTracker finds the Rollout documents that differ between base
// and head, from every device rendered and from the shared paths, and
// the devices each governs.
type rolloutTracker struct {
	byKey  map[string]*RolloutChange
	shared map[*sharedSet]map[string]*manifest.Rollout
	// pairs are the versions at base and head compared so far (those
	// of the shared paths are the same for every device): the change
	// they make, nil for none.
	pairs map[[2]*manifest.Rollout]*RolloutChange
}

func newRolloutTracker() *rolloutTracker {
	return &rolloutTracker{byKey: map[string]*RolloutChange{}, shared: map[*sharedSet]map[string]*manifest.Rollout{},
		pairs: map[[2]*manifest.Rollout]*RolloutChange{}}
}

// docs returns the Rollout documents of a device's inputs, by name: its
// own files' (a rollout may sit in a device's folder or branch) and the
// shared paths', each set of shared paths read once. ok is false when a
// file holding one does not parse: a rollout left out would read as
// removed, and the device's error says what is wrong.
func (t *rolloutTracker) docs(in *inputs) (docs map[string]*manifest.Rollout, ok bool) {
	out := map[string]*manifest.Rollout{}
	if in == nil {
		return out, true
	}
	if in.shared != nil {
		shared, ok := t.sharedDocs(in.shared)
		if !ok {
			return nil, false
		}
		for n, r := range shared {
			out[n] = r
		}
	}
	var files []manifest.Input
	for _, f := range in.own {
		if bytes.Contains(f.Data, []byte(manifest.KindRollout)) {
			files = append(files, manifest.Input{Name: f.Name, Data: f.Data})
		}
	}
	if len(files) > 0 {
		own := manifest.ParseShared(files)
		if own.Err() != nil {
			return nil, false
		}
		for _, r := range own.Rollouts() {
			if _, ok := out[r.Metadata.Name]; !ok {
				out[r.Metadata.Name] = r
			}
		}
	}
	return out, true
}

// sharedDocs returns the Rollout documents of a set of shared paths, by
// name; ok is false when they do not parse.
func (t *rolloutTracker) sharedDocs(s *sharedSet) (docs map[string]*manifest.Rollout, ok bool) {
	if s == nil {
		return map[string]*manifest.Rollout{}, true
	}
	if out, ok := t.shared[s]; ok {
		return out, out != nil
	}
	var out map[string]*manifest.Rollout
	if s.parsed.Err() == nil {
		out = map[string]*manifest.Rollout{}
		for _, r := range s.parsed.Rollouts() {
			out[r.Metadata.Name] = r
		}
	}
	t.shared[s] = out
	return out, out != nil
}

// compare records the rollouts that differ between base and head, and
// returns them by name.
func (t *rolloutTracker) compare(base, head map[string]*manifest.Rollout) map[string]*RolloutChange {
	out := map[string]*RolloutChange{}
	names := map[string]bool{}
	for n := range base {
		names[n] = true
	}
	for n := range head {
		names[n] = true
	}
	for n := range names {
		b, h := base[n], head[n]
		if b == h {
			continue
		}
		if c, ok := t.pairs[[2]*manifest.Rollout{b, h}]; ok {
			if c != nil {
				out[n] = c
			}
			continue
		}
		c := t.change(n, b, h)
		t.pairs[[2]*manifest.Rollout{b, h}] = c
		if c != nil {
			out[n] = c
		}
	}
	return out
}

// change returns the change from b to h of rollout n (nil: absent), one
// per distinct change; nil when they do not differ.
func (t *rolloutTracker) change(n string, b, h *manifest.Rollout) *RolloutChange {
	rc := RolloutChange{Name: "rollout/" + n, Devices: []string{}}
	switch {
	case b == nil:
		rc.Change = profileAdded
	case h == nil:
		rc.Change = profileRemoved
	default:
		if rc.Fields = rolloutFields(b, h); len(rc.Fields) == 0 {
			return nil
		}
		rc.Change = profileChanged
	}
	key := n + "\x00" + specKey(b) + "\x00" + specKey(h)
	if t.byKey[key] == nil {
		t.byKey[key] = &rc
	}
	return t.byKey[key]
}

func specKey(r *manifest.Rollout) string {
	if r == nil {
		return ""
	}
	return content(r.Spec)
}

// compareShared records the rollouts that differ between the shared
// paths at base and at head (nil: not known), whatever devices there are:
// a rollout that governs none is reported too.
func (t *rolloutTracker) compareShared(base, head *sharedSet) {
	if base == nil || head == nil || base == head {
		return
	}
	was, ok := t.sharedDocs(base)
	if !ok {
		return
	}
	if now, ok := t.sharedDocs(head); ok {
		t.compare(was, now)
	}
}

// add compares the rollouts a rendered device reads at base and head and
// counts the device in those that govern it: base and head are its
// inputs (nil where it has no folder; the shared paths at that revision,
// if known, stand in for them), and seen says which rollout governs it at
// each.
func (t *rolloutTracker) add(name string, base, head *inputs, sharedBase, sharedHead *sharedSet, seen layersSeen) {
	docs := func(in *inputs, shared *sharedSet) (map[string]*manifest.Rollout, bool) {
		if in.empty() {
			return t.sharedDocs(shared)
		}
		return t.docs(in)
	}
	was, ok := docs(base, sharedBase)
	if !ok {
		return
	}
	now, ok := docs(head, sharedHead)
	if !ok {
		return
	}
	changed := t.compare(was, now)
	if len(changed) == 0 {
		return
	}
	governs := func(c *manifest.Composed) string {
		if c == nil || c.Rollout == nil {
			return ""
		}
		return c.Rollout.Metadata.Name
	}
	gb, gh := governs(seen.baseComposed), governs(seen.headComposed)
	for n, rc := range changed {
		switch {
		case rc.Change == profileRemoved && gb == n:
			rc.Devices = append(rc.Devices, name)
		case rc.Change == profileRemoved:
		case gh == n:
			rc.Devices = append(rc.Devices, name)
			if rc.Change == profileChanged && gb != n {
				rc.Joined = append(rc.Joined, name)
			}
		case rc.Change == profileChanged && gb == n:
			rc.Left = append(rc.Left, name)
		}
	}
}

// result returns the changed rollouts by name, their devices sorted.
func (t *rolloutTracker) result() []RolloutChange {
	keys := make([]string, 0, len(t.byKey))
	for k := range t.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []RolloutChange
	for _, k := range keys {
		rc := *t.byKey[k]
		sort.Strings(rc.Devices)
		sort.Strings(rc.Joined)
		sort.Strings(rc.Left)
		out = append(out, rc)
	}
	return out
}

// rolloutFields says what differs between two versions of a rollout, in
// the words of its fields.
func rolloutFields(was, now *manifest.Rollout) []planner.Change {
	var out []planner.Change
	add := func(field, from, to string) {
		if from != to {
			out = append(out, planner.Change{Field: field, From: from, To: to})
		}
	}
	a, b := was.Spec, now.Spec
	add("paused", strconv.FormatBool(a.Paused), strconv.FormatBool(b.Paused))
	add("selector", selectorText(a.Selector), selectorText(b.Selector))
	add("waves", wavesText(a.Waves), wavesText(b.Waves))
	add("window", windowOrNone(a.Window), windowOrNone(b.Window))
	from, to := gateText(a.Gate), gateText(b.Gate)
	if from == to && a.Gate != nil && b.Gate != nil && a.Gate.URL != b.Gate.URL {
		to += " (other credentials)"
	}
	add("gate", from, to)
	add("stage", stageText(a.Stage), stageText(b.Stage))
	from, to = brakesOrNone(a.Brakes), brakesOrNone(b.Brakes)
	if from == to && a.Brakes != nil && b.Brakes != nil && a.Brakes.Hub != b.Brakes.Hub {
		to += " (other credentials)"
	}
	add("brakes", from, to)
	return out
}

func selectorText(s *manifest.Selector) string {
	if s == nil {
		return "none"
	}
	return s.String()
}

// wavesText is a rollout's waves in one line: [ring=canary; 10% after 1h].
func wavesText(waves []manifest.Wave) string {
	if len(waves) == 0 {
		return "none (every device at once)"
	}
	parts := make([]string, len(waves))
	for i, w := range waves {
		if w.Selector != nil {
			parts[i] = w.Selector.String()
		} else {
			parts[i] = fmt.Sprintf("%d%%", w.Percent)
		}
		if w.After > 0 {
			parts[i] += " after " + manifest.FormatDuration(w.After.D())
		}
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func windowOrNone(w *manifest.Window) string {
	if w == nil {
		return "none"
	}
	return windowText(w)
}

// gateText is a gate's URL without credentials.
func gateText(g *manifest.Gate) string {
	if g == nil {
		return "none"
	}
	return source.RedactURL(g.URL)
}

func brakesOrNone(b *manifest.Brakes) string {
	if b == nil {
		return "none"
	}
	return brakesText(b)
}

// brakesText is a rollout's brakes in one line, the hub without
// credentials: hub https://hub.example:8420, maxFailed 1, minApplied 3
// healthy for 10m, onHubDown hold.
func brakesText(b *manifest.Brakes) string {
	parts := []string{"hub " + source.RedactURL(b.Hub)}
	switch {
	case b.MaxFailed == nil && b.MaxFailedPercent == nil:
		parts = append(parts, "maxFailed 0")
	case b.MaxFailed != nil:
		parts = append(parts, fmt.Sprintf("maxFailed %d", *b.MaxFailed))
	}
	if b.MaxFailedPercent != nil {
		parts = append(parts, fmt.Sprintf("maxFailedPercent %d", *b.MaxFailedPercent))
	}
	if b.MinApplied > 0 {
		m := fmt.Sprintf("minApplied %d", b.MinApplied)
		if b.Soak > 0 {
			m += " healthy for " + manifest.FormatDuration(b.Soak.D())
		}
		parts = append(parts, m)
	}
	onDown := b.OnHubDown
	if onDown == "" {
		onDown = manifest.OnHubDownHold
	}
	return strings.Join(append(parts, "onHubDown "+onDown), ", ")
}

func stageText(s string) string {
	if s == "" {
		return manifest.StageOnSight
	}
	return s
}

// Summary names the rollout and, when one field of it changed, how:
// "rollout/default: paused false → true"; "rollout/default:" when
// several did (FieldLines has them), "rollout/spare (added)".
func (c RolloutChange) Summary() string {
	switch {
	case c.Change != profileChanged:
		return c.Name + " (" + c.Change + ")"
	case len(c.Fields) == 1:
		return c.Name + ": " + fieldText(c.Fields[0])
	}
	return c.Name + ":"
}

// FieldLines are the fields that changed, one a line, when more than one
// did (Summary has a single one).
func (c RolloutChange) FieldLines() []string {
	if len(c.Fields) < 2 {
		return nil
	}
	out := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		out[i] = fieldText(f)
	}
	return out
}

func fieldText(f planner.Change) string { return f.Field + " " + f.From + " → " + f.To }

// DeviceLines say which inventory devices the rollout governs, and which
// it no longer governs, naming at most limit of each (0: every one).
func (c RolloutChange) DeviceLines(limit int) []string {
	list := func(names []string) string {
		if limit > 0 && len(names) > limit {
			names = append(names[:limit:limit], fmt.Sprintf("… and %d more", len(names)-limit))
		}
		return strings.Join(names, ", ")
	}
	var out []string
	switch {
	case c.Change == profileRemoved && len(c.Devices) == 0:
		out = append(out, "governed no device with a Device document in Git")
	case c.Change == profileRemoved:
		n := len(c.Devices)
		out = append(out, "governed "+planner.Count(n, "device")+": "+list(c.Devices)+"; unless another rollout governs "+
			pick(n, "it, it takes", "them, they take")+" a release at "+pick(n, "its", "their")+" next tick")
	case len(c.Devices) == 0:
		out = append(out, "governs no device with a Device document in Git (it may still govern devices known only by their agent config labels)")
	default:
		line := "governs " + planner.Count(len(c.Devices), "device") + ": " + list(c.Devices)
		if len(c.Joined) > 0 {
			line += " (" + strconv.Itoa(len(c.Joined)) + " newly: " + list(c.Joined) + ")"
		}
		out = append(out, line)
	}
	if len(c.Left) > 0 {
		out = append(out, "no longer governs "+planner.Count(len(c.Left), "device")+": "+list(c.Left))
	}
	return out
}
