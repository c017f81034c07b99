package validate

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/rollout"
)

// maxReachNames bounds the devices named per profile.
const maxReachNames = 10

// finding is a document's problems or warnings, found checking one
// subject: a device (Kind "device"), or a profile or rollout by its id.
type finding struct {
	Kind    string // "device", or "" for a profile or rollout
	Subject string // a device's name, or profile/NAME, rollout/NAME with where it is
	At      string // " at REV" for a device of a revision, or ""
	Err     error  // manifest.Errors or a ComposeError, or any error
}

// block is the problems several subjects share, in the order found.
type block struct {
	kind, at string
	subjects []string
	lines    []string
}

// writeFindings prints every problem of findings once, headed by word
// ("invalid", "warning") and the subjects it is a problem of: a problem
// of a profile that every device it applies to shares is printed once
// for them all, naming them, not once per device.
func writeFindings(out io.Writer, word string, findings []finding) {
	type problem struct {
		kind, at, text string
		subjects       []string
	}
	byKey := map[string]*problem{}
	var order []*problem
	for _, f := range findings {
		for _, text := range problemLines(f.Err) {
			key := f.Kind + "\x00" + f.At + "\x00" + text
			p := byKey[key]
			if p == nil {
				p = &problem{kind: f.Kind, at: f.At, text: text}
				byKey[key] = p
				order = append(order, p)
			}
			if len(p.subjects) == 0 || p.subjects[len(p.subjects)-1] != f.Subject {
				p.subjects = append(p.subjects, f.Subject)
			}
		}
	}
	var blocks []*block
	byGroup := map[string]*block{}
	for _, p := range order {
		key := p.kind + "\x00" + p.at + "\x00" + strings.Join(p.subjects, "\x00")
		b := byGroup[key]
		if b == nil {
			b = &block{kind: p.kind, at: p.at, subjects: p.subjects}
			byGroup[key] = b
			blocks = append(blocks, b)
		}
		b.lines = append(b.lines, p.text)
	}
	for _, b := range blocks {
		who := strings.Join(b.subjects, ", ")
		if b.kind == "device" {
			who = deviceList(b.subjects)
		}
		fmt.Fprintf(out, "%s: %s%s:\n  %s\n", word, who, b.at, strings.ReplaceAll(strings.Join(b.lines, "\n"), "\n", "\n  "))
	}
}

// problemLines splits err into its problems: one per manifest.Error, or
// its whole text.
func problemLines(err error) []string {
	if err == nil {
		return nil
	}
	errs := manifest.AsErrors(err)
	if errs == nil {
		return []string{err.Error()}
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// warningsError makes warnings an error for writeFindings.
func warningsError(warnings []*manifest.Error) error {
	if len(warnings) == 0 {
		return nil
	}
	return manifest.Errors(warnings)
}

// composeWarnings returns the warnings of a device that failed to
// compose, as far as it got.
func composeWarnings(err error) error {
	var ce *manifest.ComposeError
	if errors.As(err, &ce) {
		return warningsError(ce.Warnings)
	}
	return nil
}

// deviceList names devices, at most maxReachNames of them: "device cam-1",
// "devices cam-1, cam-2".
func deviceList(devices []string) string {
	if len(devices) == 1 {
		return "device " + devices[0]
	}
	return "devices " + strings.Join(capNames(devices), ", ")
}

// capNames returns names, cut to maxReachNames with a count of the rest.
func capNames(names []string) []string {
	if len(names) <= maxReachNames {
		return names
	}
	return append(names[:maxReachNames:maxReachNames], fmt.Sprintf("… and %d more", len(names)-maxReachNames))
}

// reach says which devices a profile applies to (verb "applies to") or a
// rollout governs ("governs"): where says where they are known from ("in
// Git", "in the files given"), and invalid are those of them that are
// invalid.
func reach(verb string, devices []string, where string, invalid map[string]bool) string {
	if len(devices) == 0 {
		return verb + " no device with a Device document " + where + " (it may still match devices known only by their agent config labels)"
	}
	s := verb + " " + planner.Count(len(devices), "device") + ": " + strings.Join(capNames(devices), ", ")
	bad := 0
	for _, d := range devices {
		if invalid[d] {
			bad++
		}
	}
	switch {
	case bad == 0:
	case bad == len(devices) && bad == 1:
		s += " (invalid)"
	case bad == len(devices):
		s += " (all invalid)"
	default:
		s += fmt.Sprintf(" (%d of them invalid)", bad)
	}
	return s
}

// labeled is a device with its labels in Git.
type labeled struct {
	name   string
	labels map[string]string
}

// rolloutReport writes which of devices rollout r governs and the wave
// each falls in, under a line "valid: rollout/NAME (file:line): …", and
// returns a warning for every selector wave that takes none of them: a
// mistyped label leaves the fleet without that wave (a canary) and says
// nothing else.
func rolloutReport(out io.Writer, r *manifest.Rollout, devices []labeled, where string, invalid map[string]bool) []*manifest.Error {
	id := "rollout/" + r.Metadata.Name
	var governed []labeled
	var names []string
	for _, d := range devices {
		if r.Spec.Selector.Matches(d.labels) {
			governed = append(governed, d)
			names = append(names, d.name)
		}
	}
	fmt.Fprintf(out, "valid: %s (%s:%d): %s\n", id, r.Origin.File, r.Origin.Line("metadata.name"), reach("governs", names, where, invalid))
	if len(governed) == 0 || len(r.Spec.Waves) == 0 {
		return nil
	}
	waves := make([][]string, len(r.Spec.Waves))
	var none []string
	for _, d := range governed {
		i, _ := rollout.Wave(d.name, d.labels, r)
		if i == rollout.NoWave {
			none = append(none, d.name)
			continue
		}
		waves[i] = append(waves[i], d.name)
	}
	var warnings []*manifest.Error
	for i, w := range r.Spec.Waves {
		what := fmt.Sprintf("%d%%", w.Percent)
		if w.Selector != nil {
			what = "selector " + w.Selector.String()
		}
		if w.After > 0 {
			what += ", after " + manifest.FormatDuration(w.After.D())
		}
		fmt.Fprintf(out, "  wave %d (%s): %s\n", i, what, waveReach(waves[i]))
		if w.Selector == nil || len(waves[i]) > 0 {
			continue
		}
		field := fmt.Sprintf("spec.waves[%d].selector", i)
		why := "no device it governs with a Device document " + where + " matches it"
		for _, d := range governed {
			if w.Selector.Matches(d.labels) {
				why = "every device it matches falls in an earlier wave"
				break
			}
		}
		warnings = append(warnings, &manifest.Error{File: r.Origin.File, Line: r.Origin.Line(field), Field: field,
			Msg: fmt.Sprintf("wave %d of %s selects %s, but %s: no device takes a release in this wave (check the labels; it may still match devices known only by their agent config labels)",
				i, id, w.Selector.String(), why)})
	}
	if len(none) > 0 {
		fmt.Fprintf(out, "  in no wave (held: past the last percent): %s\n", waveReach(none))
	}
	return warnings
}

func waveReach(devices []string) string {
	if len(devices) == 0 {
		return "no device"
	}
	return planner.Count(len(devices), "device") + ": " + strings.Join(capNames(devices), ", ")
}

// inDocument reports whether e lies in the document that starts at
// file:line, given where the documents of interest start (starts, by
// file): in that file, at or after line, and before the next document.
func inDocument(e *manifest.Error, file string, line int, starts map[string][]int) bool {
	if e.File != file || e.Line < line {
		return false
	}
	for _, s := range starts[file] {
		if s > line && e.Line >= s {
			return false
		}
	}
	return true
}

// allowNote says whether the paths were checked against allowPaths, and
// against which: those of the config file from, or else of flags or
// --config; give says how to give them when there were none.
func allowNote(opts manifest.ValidateOptions, from, give string) string {
	switch {
	case !opts.CheckAllowPaths:
		return "(allowPaths not checked: none given; give " + give + " to check that every path lies under them)"
	case from != "":
		return "(paths checked against the allowPaths of " + from + ")"
	}
	return "(paths checked against allowPaths " + strings.Join(opts.AllowPaths, ", ") + ")"
}
