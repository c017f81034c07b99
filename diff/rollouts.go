package diff

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// DeviceRollout is when a device takes a change, under the Rollout at
// head that governs it (DESIGN.md: the Rollout at the target commit
// governs the move to that commit). CI has seen no device, so when a
// wave opens is relative to when the device first sees the release.
type DeviceRollout struct {
	Rollout *manifest.Rollout // at head
	Wave    int               // index in Rollout's waves, or rollout.NoWave
	Bucket  int               // rollout.Bucket of the device's name
	After   time.Duration     // after the device first sees the release
	// Added is set for a device with no manifests at base: its agent has
	// applied nothing, and a device that has applied nothing takes its
	// first commit at once, whatever its wave.
	Added bool
}

// deviceRollout is the rollout of a device whose change is a release: a
// plan that does something, and a rollout at head that governs the device.
func deviceRollout(d Device, head *manifest.Composed) *DeviceRollout {
	if head == nil || head.Rollout == nil || d.Plan == nil || d.Plan.Empty() {
		return nil
	}
	var labels map[string]string
	if head.Device != nil {
		labels = head.Device.Metadata.Labels
	}
	wave, after := rollout.Wave(d.Name, labels, head.Rollout)
	return &DeviceRollout{Rollout: head.Rollout, Wave: wave, Bucket: rollout.Bucket(d.Name), After: after, Added: d.Status == Added}
}

// Name is the rollout's name as a layer is named: rollout/NAME.
func (r *DeviceRollout) Name() string { return "rollout/" + r.Rollout.Metadata.Name }

// String is the line text output prints under the device: which wave
// and when the device takes the change. Its words follow the agent's
// held reasons (rollout.Decide).
func (r *DeviceRollout) String() string {
	var b strings.Builder
	if r.Wave == rollout.NoWave {
		fmt.Fprintf(&b, "in no wave of %s (%s)", r.Name(), noWave(r.Rollout, r.Bucket))
	} else {
		fmt.Fprintf(&b, "wave %d of %s (%s)", r.Wave, r.Name(), who(r.Rollout.Spec.Waves, r.Wave, r.Bucket))
	}
	switch {
	case r.Added:
		b.WriteString(", but an added device has applied nothing: it takes its first commit at once")
	case r.Rollout.Spec.Paused:
		b.WriteString(", paused: held until a commit sets paused: false")
	case r.Wave == rollout.NoWave:
		b.WriteString(": held")
	default:
		b.WriteString(", " + opens(r.After, r.Rollout.Spec))
		if br := r.Rollout.Spec.Brakes; br != nil && r.Wave > 0 {
			b.WriteString(", if the brakes let it through (" + brakesText(br) + ")")
		}
	}
	return b.String()
}

// who says how a device falls in wave i: its selector, or its percent
// and, with bucket >= 0, the device's bucket.
func who(waves []manifest.Wave, i, bucket int) string {
	if len(waves) == 0 {
		return "every device it governs"
	}
	w := waves[i]
	if w.Selector != nil {
		return "selector " + w.Selector.String()
	}
	if bucket < 0 {
		return fmt.Sprintf("%d%%", w.Percent)
	}
	return fmt.Sprintf("%d%%, bucket %d", w.Percent, bucket)
}

// noWave says why a device is in no wave of r.
func noWave(r *manifest.Rollout, bucket int) string {
	last := lastPercent(r.Spec.Waves)
	if last == 0 {
		return "no wave's selector matches it and there is no percent wave"
	}
	if bucket < 0 {
		return fmt.Sprintf("bucket %d or more, past the last percent", last)
	}
	return fmt.Sprintf("bucket %d is past the last percent, %d", bucket, last)
}

func lastPercent(waves []manifest.Wave) int {
	last := 0
	for _, w := range waves {
		if w.Selector == nil {
			last = max(last, w.Percent)
		}
	}
	return last
}

// opens says when a wave that opens after the device first sees the
// release lets it through: then inside the window, if the gate says go.
func opens(after time.Duration, spec manifest.RolloutSpec) string {
	var parts []string
	if after > 0 {
		parts = append(parts, "opens "+manifest.FormatDuration(after)+" after the device sees the release")
	}
	if w := spec.Window; w != nil {
		in := "inside the window " + windowText(w)
		if len(parts) > 0 {
			in = "then " + in
		}
		parts = append(parts, in)
	}
	if len(parts) == 0 {
		parts = append(parts, "at once")
	}
	if spec.Gate != nil {
		parts = append(parts, "if the gate answers 200")
	}
	return strings.Join(parts, ", ")
}

// windowText is a window as a user wrote it: 0 2 * * * for 3h (Europe/Berlin).
func windowText(w *manifest.Window) string {
	return fmt.Sprintf("%s for %s (%s)", w.Schedule, manifest.FormatDuration(w.Duration.D()), zone(w))
}

// zone is a window's time zone, UTC when it names none.
func zone(w *manifest.Window) string {
	if w.TimeZone == "" {
		return "UTC"
	}
	return w.TimeZone
}

// pick is one when n is 1, else many.
func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// JSONRollout is a device's DeviceRollout in a JSONDiff.
type JSONRollout struct {
	Name   string            `json:"name"`   // rollout/NAME
	Wave   int               `json:"wave"`   // -1: in no wave, held
	Bucket int               `json:"bucket"` // hash of the device name mod 100
	After  manifest.Duration `json:"after"`  // after the device first sees the release
	Paused bool              `json:"paused"`
	Window *manifest.Window  `json:"window,omitempty"`
	Gate   *manifest.Gate    `json:"gate,omitempty"`   // its URL without credentials
	Brakes *manifest.Brakes  `json:"brakes,omitempty"` // the hub's URL without credentials
	// Added: the device has applied nothing and takes its first commit
	// at once.
	Added bool `json:"added,omitempty"`
}

// JSON returns the machine-readable form of r.
func (r *DeviceRollout) JSON() *JSONRollout {
	spec := r.Rollout.Spec
	out := &JSONRollout{Name: r.Name(), Wave: r.Wave, Bucket: r.Bucket, After: manifest.Duration(r.After), Paused: spec.Paused, Window: spec.Window, Added: r.Added}
	if spec.Gate != nil {
		out.Gate = &manifest.Gate{URL: source.RedactURL(spec.Gate.URL)}
	}
	if spec.Brakes != nil {
		b := *spec.Brakes
		b.Hub = source.RedactURL(b.Hub)
		out.Brakes = &b
	}
	return out
}

// rolloutGroup is the changed devices one rollout governs.
type rolloutGroup struct {
	r      *manifest.Rollout
	byWave map[int]int // wave index (or rollout.NoWave) → devices
	total  int
	added  int
}

// groupRollouts gathers the changed devices by the rollout that governs
// them, by name (and by spec, should device branches hold different
// rollouts of one name), and counts those no rollout governs.
func groupRollouts(ds []Device) (groups []*rolloutGroup, ungoverned int) {
	index := map[string]*rolloutGroup{}
	for _, d := range ds {
		if d.Rollout == nil {
			if d.Status != Failed && d.Plan != nil && !d.Plan.Empty() {
				ungoverned++
			}
			continue
		}
		spec, _ := json.Marshal(d.Rollout.Rollout.Spec)
		key := d.Rollout.Rollout.Metadata.Name + "\x00" + string(spec)
		g := index[key]
		if g == nil {
			g = &rolloutGroup{r: d.Rollout.Rollout, byWave: map[int]int{}}
			index[key] = g
			groups = append(groups, g)
		}
		g.byWave[d.Rollout.Wave]++
		g.total++
		if d.Rollout.Added {
			g.added++
		}
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].r.Metadata.Name < groups[j].r.Metadata.Name })
	return groups, ungoverned
}

// mdRollouts is the rollout section of a markdown diff: per rollout that
// governs a changed device, its waves, when each opens and how many of
// the changed devices fall in it. Empty when no rollout governs any.
func mdRollouts(ds []Device) string {
	groups, ungoverned := groupRollouts(ds)
	if len(groups) == 0 {
		return ""
	}
	var b strings.Builder
	for _, g := range groups {
		spec := g.r.Spec
		fmt.Fprintf(&b, "Rollout `rollout/%s`: %s.\n\n", g.r.Metadata.Name, planner.Count(g.total, "changed device"))
		b.WriteString("| wave | who | opens | changed devices |\n|--:|:--|:--|--:|\n")
		n := max(len(spec.Waves), 1)
		for i := range n {
			when := "at once"
			if len(spec.Waves) > 0 && spec.Waves[i].After > 0 {
				when = manifest.FormatDuration(spec.Waves[i].After.D()) + " after the device sees the release"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %d |\n", i, mdEscape(who(spec.Waves, i, -1)), when, g.byWave[i])
		}
		if len(spec.Waves) > 0 && (g.byWave[rollout.NoWave] > 0 || lastPercent(spec.Waves) < 100) {
			fmt.Fprintf(&b, "| none | %s | held | %d |\n", mdEscape(noWave(g.r, -1)), g.byWave[rollout.NoWave])
		}
		var notes []string
		if spec.Paused {
			notes = append(notes, "**Paused**: no device takes this change until a commit sets `paused: false`.")
		}
		if w := spec.Window; w != nil {
			notes = append(notes, fmt.Sprintf("Window: once its wave opens, a device takes the change only inside the window `%s` for %s (%s).",
				w.Schedule, manifest.FormatDuration(w.Duration.D()), zone(w)))
		}
		if spec.Gate != nil {
			notes = append(notes, "Gate: then each device asks the gate, and takes the change if it answers 200.")
		}
		if br := spec.Brakes; br != nil {
			notes = append(notes, fmt.Sprintf("Brakes: a device of wave 1 or later first asks the hub how the change went in the earlier waves, and holds while they fail it or have not run it long enough: `%s`.", brakesText(br)))
		}
		if g.added > 0 {
			notes = append(notes, fmt.Sprintf("%s applied nothing yet: %s first commit at once, whatever %s wave.",
				pick(g.added, "1 added device has", fmt.Sprintf("%d added devices have", g.added)),
				pick(g.added, "it takes its", "they take their"), pick(g.added, "its", "their")))
		}
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
		if len(notes) > 0 {
			b.WriteString("\n")
		}
	}
	if ungoverned > 0 {
		fmt.Fprintf(&b, "No rollout governs %s: %s the change at %s next tick.\n\n",
			planner.Count(ungoverned, "changed device"), pick(ungoverned, "it takes", "they take"), pick(ungoverned, "its", "their"))
	}
	return b.String()
}
