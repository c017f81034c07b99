package manifest

import (
	"fmt"
	"net/url"
	"time"
	_ "time/tzdata" // a window's time zone is found on a device without zoneinfo

	"github.com/robfig/cron/v3"
)

// KindRollout is a document that says when the devices its selector
// matches take a release: in waves, inside a window, unless paused.
const KindRollout = "Rollout"

// Rollout governs when each device it selects takes a release.
type Rollout struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ProfileMetadata `json:"metadata" jsonschema:"required"`
	Spec       RolloutSpec     `json:"spec"`

	Origin Origin `json:"-"`
}

// RolloutSpec is which devices a rollout governs, and how.
type RolloutSpec struct {
	// Selector picks the devices by their labels; {} matches every device.
	Selector *Selector `json:"selector" jsonschema:"required"`
	// Waves are the groups of devices, in the order they take a release.
	Waves []Wave `json:"waves,omitempty"`
	// Paused true: no device takes a release it has not taken.
	Paused bool `json:"paused,omitempty"`
	// Window is when a release may start; drift reverts are not held.
	Window *Window `json:"window,omitempty"`
	// Gate is asked before a release is taken.
	Gate *Gate `json:"gate,omitempty"`
	// Stage says when a device downloads a release: onSight (the
	// default), as soon as it sees it, even while this rollout holds it;
	// onRelease, only once the rollout lets it through.
	Stage string `json:"stage,omitempty" jsonschema:"enum=onSight,enum=onRelease"`
	// Brakes stop the later waves of a release that fails in the earlier
	// ones, as the hub counts them.
	Brakes *Brakes `json:"brakes,omitempty"`
}

// Brakes are a rollout's thresholds over the earlier waves of a release:
// before taking a release in wave k > 0, a device asks the hub for the
// verdict on that release in waves 0 to k-1, and holds while more devices
// there failed than MaxFailed (or MaxFailedPercent of them), or fewer
// than MinApplied applied it and stayed healthy for Soak.
type Brakes struct {
	// Hub is tend-hub's base URL, https://hub.example:8420.
	Hub string `json:"hub" jsonschema:"required"`
	// MaxFailed is how many earlier-wave devices may fail the release
	// before later waves stop; with neither it nor MaxFailedPercent set,
	// 0: one failure stops them.
	MaxFailed *int `json:"maxFailed,omitempty" jsonschema:"minimum=0"`
	// MaxFailedPercent is the share of earlier-wave devices that may fail.
	MaxFailedPercent *int `json:"maxFailedPercent,omitempty" jsonschema:"minimum=0,maximum=100"`
	// MinApplied is how many earlier-wave devices must have applied the
	// release, and stayed healthy for Soak, before a later wave goes.
	MinApplied int `json:"minApplied,omitempty" jsonschema:"minimum=0"`
	// Soak is how long those devices must have run it.
	Soak Duration `json:"soak,omitempty"`
	// OnHubDown is what a device does when the hub does not answer:
	// hold (the default) or proceed.
	OnHubDown string `json:"onHubDown,omitempty" jsonschema:"enum=hold,enum=proceed"`
}

// What a device does when the brakes' hub does not answer.
const (
	OnHubDownHold    = "hold"
	OnHubDownProceed = "proceed"
)

// When a device stages a release (RolloutSpec.Stage).
const (
	StageOnSight   = "onSight"
	StageOnRelease = "onRelease"
)

// Wave is one group of devices: those its selector matches, or, by a
// stable hash of their name, the given percent of the fleet (cumulative:
// 10 then 50 is 10% of the devices, then 40% more).
type Wave struct {
	Selector *Selector `json:"selector,omitempty"`
	Percent  int       `json:"percent,omitempty"`
	// After is how long after the device first saw a release its wave
	// opens.
	After Duration `json:"after,omitempty"`
}

// Window is a maintenance window: it opens at each time of Schedule, in
// TimeZone, for Duration.
type Window struct {
	Schedule string   `json:"schedule" jsonschema:"required"`
	Duration Duration `json:"duration" jsonschema:"required"`
	// TimeZone is an IANA name such as Europe/Berlin; default UTC.
	TimeZone string `json:"timeZone,omitempty"`

	// Cron and Location are Schedule and TimeZone parsed.
	Cron     cron.Schedule  `json:"-"`
	Location *time.Location `json:"-"`
}

// Gate is a URL a device GETs before taking a release: 200 means go.
type Gate struct {
	URL string `json:"url" jsonschema:"required"`
}

// check reports what is wrong with a rollout beyond its shape, and parses
// its window.
func (r *Rollout) check(info *document, errs *Errors) {
	checkName(info, "rollout", r.Metadata.Name, errs)
	if r.Spec.Selector == nil {
		errs.add(info.file, nearestLine(info, "spec.selector"), "spec.selector",
			"missing: the devices this rollout governs, e.g. {matchLabels: {site: plant-a}}; {} governs every device")
	} else {
		r.Spec.Selector.check(info, "spec.selector", errs)
	}
	r.checkWaves(info, errs)
	if w := r.Spec.Window; w != nil {
		w.check(info, errs)
	}
	switch r.Spec.Stage {
	case "", StageOnSight, StageOnRelease:
	default:
		errs.add(info.file, nearestLine(info, "spec.stage"), "spec.stage",
			"unknown stage %q: use onSight (download a release as soon as it is seen) or onRelease (once the rollout lets it through)", r.Spec.Stage)
	}
	if b := r.Spec.Brakes; b != nil {
		r.checkBrakes(b, info, errs)
	}
	if g := r.Spec.Gate; g != nil {
		u, err := url.Parse(g.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.add(info.file, nearestLine(info, "spec.gate.url"), "spec.gate.url",
				"invalid gate %q: use an http:// or https:// URL", g.URL)
		}
	}
}

// checkBrakes reports a brakes hub that is no http(s) URL, thresholds out
// of range, a soak nothing waits for, and brakes with no later wave to stop.
func (r *Rollout) checkBrakes(b *Brakes, info *document, errs *Errors) {
	at := func(field, format string, args ...any) {
		errs.add(info.file, nearestLine(info, "spec.brakes"+field), "spec.brakes"+field, format, args...)
	}
	if u, err := url.Parse(b.Hub); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		at(".hub", "invalid hub %q: use tend-hub's http:// or https:// URL, e.g. https://hub.example:8420", b.Hub)
	}
	if b.MaxFailed != nil && *b.MaxFailed < 0 {
		at(".maxFailed", "maxFailed %d is negative: use 0 (one failure stops later waves) or more", *b.MaxFailed)
	}
	if p := b.MaxFailedPercent; p != nil && (*p < 0 || *p > 100) {
		at(".maxFailedPercent", "maxFailedPercent %d is out of range: use 0 to 100", *p)
	}
	if b.MinApplied < 0 {
		at(".minApplied", "minApplied %d is negative: use 0 (no wait) or more", b.MinApplied)
	}
	switch {
	case b.Soak < 0:
		at(".soak", "soak %s is negative: use a duration such as 10m", b.Soak.D())
	case b.Soak > 0 && b.MinApplied == 0:
		at(".soak", "soak %s waits for no device: set minApplied, the earlier-wave devices that must run the release healthy for soak", b.Soak.D())
	}
	switch b.OnHubDown {
	case "", OnHubDownHold, OnHubDownProceed:
	default:
		at(".onHubDown", "unknown onHubDown %q: use hold (wait for the hub) or proceed (go on without its verdict)", b.OnHubDown)
	}
	if len(r.Spec.Waves) < 2 {
		at("", "brakes stop later waves on the failures of earlier ones, and this rollout has %d wave(s): give spec.waves at least two, e.g. a canary selector then 100 percent", len(r.Spec.Waves))
	}
}

// checkWaves reports a wave that is neither or both kinds, a percent out
// of range, and percents or afters that decrease.
func (r *Rollout) checkWaves(info *document, errs *Errors) {
	lastPercent, lastAfter := 0, Duration(0)
	for i, w := range r.Spec.Waves {
		f := fmt.Sprintf("spec.waves[%d]", i)
		at := func(field, format string, args ...any) {
			errs.add(info.file, nearestLine(info, f+field), f+field, format, args...)
		}
		switch {
		case w.Selector != nil && w.Percent != 0:
			at("", "a wave has either a selector or a percent, not both: split it into two waves")
		case w.Selector != nil:
			w.Selector.check(info, f+".selector", errs)
		case w.Percent < 1 || w.Percent > 100:
			at(".percent", "percent %d is out of range: use 1 to 100 (or a selector for a named group)", w.Percent)
		case w.Percent <= lastPercent:
			at(".percent", "percent %d does not increase on the wave before (%d): percents are cumulative, e.g. 10, 50, 100", w.Percent, lastPercent)
		default:
			lastPercent = w.Percent
		}
		if w.After < lastAfter {
			at(".after", "after %s is earlier than the wave before (%s): a later wave opens no sooner", w.After.D(), lastAfter.D())
		} else {
			lastAfter = w.After
		}
	}
}

// firesYearly reports whether c fires within a year of the start of each
// year of a leap cycle (so 29 February, every fourth year, does not):
// robfig/cron's Next returns the zero time for a schedule that never
// fires, which would otherwise read as a window always open.
func firesYearly(c cron.Schedule) bool {
	for year := 2025; year < 2029; year++ {
		from := time.Date(year, time.January, 1, 0, 0, 0, 0, time.UTC)
		if next := c.Next(from); next.IsZero() || next.Sub(from) > 366*24*time.Hour {
			return false
		}
	}
	return true
}

// check parses w's schedule and time zone.
func (w *Window) check(info *document, errs *Errors) {
	c, err := cron.ParseStandard(w.Schedule)
	if err != nil {
		errs.add(info.file, nearestLine(info, "spec.window.schedule"), "spec.window.schedule",
			"invalid schedule %q: %v; use a cron spec such as \"0 2 * * *\" (02:00 every day)", w.Schedule, err)
	}
	w.Cron = c
	if c != nil && !firesYearly(c) {
		errs.add(info.file, nearestLine(info, "spec.window.schedule"), "spec.window.schedule",
			"schedule %q opens the window less than once a year (or never: a day no month has); use a cron spec such as \"0 2 * * *\" (02:00 every day)", w.Schedule)
	}
	if w.Duration <= 0 {
		errs.add(info.file, nearestLine(info, "spec.window.duration"), "spec.window.duration",
			"missing: how long the window stays open, e.g. 3h")
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil || w.TimeZone == "Local" {
		errs.add(info.file, nearestLine(info, "spec.window.timeZone"), "spec.window.timeZone",
			"unknown time zone %q: use an IANA name such as Europe/Berlin, or UTC", w.TimeZone)
	}
	w.Location = loc
}

// rollout returns the rollout whose selector matches labels, or nil; two
// that match are an error naming both, at the second.
func (s parsedSet) rollout(device string, labels map[string]string) (*Rollout, Errors) {
	var first *parsedRollout
	var errs Errors
	for i := range s.rollouts {
		p := &s.rollouts[i]
		if !p.roll.Spec.Selector.Matches(labels) {
			continue
		}
		if first == nil {
			first = p
			continue
		}
		errs.add(p.info.file, nearestLine(p.info, "spec.selector"), "spec.selector",
			"rollout/%s and rollout/%s (%s:%d) both select device %s (labels %s): a device follows one rollout; narrow their selectors",
			p.roll.Metadata.Name, first.roll.Metadata.Name, first.info.file, nearestLine(first.info, "spec.selector"), device, labelList(labels))
	}
	if first == nil {
		return nil, errs
	}
	r := first.roll
	return &r, errs
}
