package api

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// VerdictQuery is what a device of a later wave asks the brakes' hub: the
// query of GET /v1/verdict, which the agent encodes and the hub parses
// (release, revision, rollout, before, maxFailed, maxFailedPercent,
// minApplied, soak).
type VerdictQuery struct {
	// Release is the key of the release asked about (see ReleaseKey);
	// "" from a tend that sends none (v0.1.0), whose release is its
	// revision's commit.
	Release ReleaseKey
	// Revision is the fleet revision the device saw it at,
	// ref@sha1:commit: a hub that knows no keys counts by it.
	Revision string
	// Rollout is the name of the asking device's Rollout: the hub counts
	// only the devices of that rollout. "" from a tend that sends none,
	// whose verdict counts the devices of every rollout.
	Rollout string
	// Before is the asking device's wave: waves 0 to Before-1 are counted.
	Before int
	Thresholds
}

// Thresholds are a rollout's brakes as a device sends them with a
// VerdictQuery (the hub reads no rollout; rollout.BrakesQuery makes them
// from one).
type Thresholds struct {
	// MaxFailed and MaxFailedPercent: more failed devices than these stop
	// later waves; nil when not set. With neither set, one failure does.
	MaxFailed        *int
	MaxFailedPercent *int
	// MinApplied devices must have applied the release and stayed healthy
	// for Soak before a later wave goes.
	MinApplied int
	Soak       time.Duration
}

// Bounds of the text parameters of a VerdictQuery.
const (
	maxRevisionBytes = 1024
	maxNameBytes     = 253
)

// Key is the release asked about: Release, or the commit of Revision.
func (q VerdictQuery) Key() ReleaseKey {
	if q.Release != "" {
		return q.Release
	}
	return RevisionRelease(q.Revision)
}

// Encode is q as the URL query of GET /v1/verdict, keys sorted, the
// thresholds not set left out:
// before=2&maxFailed=1&release=model%2Fdetector%40sha256%3A…&revision=main%40sha1%3A….
func (q VerdictQuery) Encode() string {
	v := url.Values{"revision": {q.Revision}, "before": {strconv.Itoa(q.Before)}}
	if q.Release != "" {
		v.Set("release", q.Release.String())
	}
	if q.Rollout != "" {
		v.Set("rollout", q.Rollout)
	}
	if q.MaxFailed != nil {
		v.Set("maxFailed", strconv.Itoa(*q.MaxFailed))
	}
	if q.MaxFailedPercent != nil {
		v.Set("maxFailedPercent", strconv.Itoa(*q.MaxFailedPercent))
	}
	if q.MinApplied > 0 {
		v.Set("minApplied", strconv.Itoa(q.MinApplied))
	}
	if q.Soak > 0 {
		v.Set("soak", q.Soak.String())
	}
	return v.Encode()
}

// ParseVerdictQuery reads the query of GET /v1/verdict. Its errors say
// which parameter is wrong and what it takes, for a 400.
func ParseVerdictQuery(v url.Values) (VerdictQuery, error) {
	var q VerdictQuery
	q.Revision = v.Get("revision")
	if len(q.Revision) > maxRevisionBytes {
		return VerdictQuery{}, fmt.Errorf("revision: %d bytes, more than %d: send ref@sha1:commit", len(q.Revision), maxRevisionBytes)
	}
	q.Rollout = v.Get("rollout")
	if len(q.Rollout) > maxNameBytes || strings.ContainsFunc(q.Rollout, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) {
		return VerdictQuery{}, fmt.Errorf("rollout: not a rollout's name (metadata.name, at most %d bytes of printable text)", maxNameBytes)
	}
	if raw := v.Get("release"); raw != "" {
		k, err := ParseReleaseKey(raw)
		if err != nil {
			return VerdictQuery{}, fmt.Errorf("release: %w", err)
		}
		q.Release = k
	}
	if q.Revision == "" && q.Release == "" {
		return VerdictQuery{}, fmt.Errorf("release: missing: the key of the release asked about (or revision, ref@sha1:commit, its commit's)")
	}
	num := func(name string, lo, hi int) (*int, error) {
		raw := v.Get(name)
		if raw == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: use a whole number from %d to %d", name, raw, lo, hi)
		}
		return &n, nil
	}
	b, err := num("before", 1, 1<<20)
	if err != nil {
		return VerdictQuery{}, err
	}
	if b == nil {
		return VerdictQuery{}, fmt.Errorf("before: missing: the asking device's wave; waves 0 to before-1 are counted")
	}
	q.Before = *b
	if q.MaxFailed, err = num("maxFailed", 0, 1<<30); err != nil {
		return VerdictQuery{}, err
	}
	if q.MaxFailedPercent, err = num("maxFailedPercent", 0, 100); err != nil {
		return VerdictQuery{}, err
	}
	m, err := num("minApplied", 0, 1<<30)
	if err != nil {
		return VerdictQuery{}, err
	}
	if m != nil {
		q.MinApplied = *m
	}
	if raw := v.Get("soak"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return VerdictQuery{}, fmt.Errorf("soak %q: use a duration such as 10m", raw)
		}
		q.Soak = d
	}
	return q, nil
}

// Verdict is the hub's answer to a VerdictQuery (GET /v1/verdict): how
// a release stands in the waves before the asking device's, and whether
// that device may take it.
type Verdict struct {
	// Release is the key of the release judged (see ReleaseKey);
	// Revision the revision the asking device saw it at ("" when it did
	// not say).
	Release  string `json:"release"`
	Revision string `json:"revision"`
	// Rollout is the rollout whose devices were counted (the query's);
	// absent when the query named none, and every rollout counted.
	Rollout string `json:"rollout,omitempty"`
	Before  int    `json:"before"`  // waves 0 to before-1 were counted
	Devices int    `json:"devices"` // their devices the release targets
	Failed  int    `json:"failed"`  // rolled back, or in a crash loop running it
	Applied int    `json:"applied"`
	// Soaked are the applied devices that run it, healthy, for soak.
	Soaked int  `json:"soaked"`
	Go     bool `json:"go"`
	// Tripped says failures passed a threshold: later waves stop until a
	// new release (a fix, or a revert: a new commit or a new digest).
	Tripped bool `json:"tripped"`
	// Reason says why a device may not go: "2 of 5 wave-0 devices failed
	// main@sha1:ab12… (maxFailed 1)", "1 of 1 wave-0 devices failed
	// model/detector@sha256:1f16… (maxFailed 0)"; or, of a release of
	// digests no earlier device declares, why it goes: "no wave-0 device
	// runs model/detector; nothing to wait for".
	Reason string `json:"reason,omitempty"`
}
