package diff

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Placeholders of the agent config's source.path and source.ref, as diff
// reads them: {device} is the device's name, {label:KEY} any one segment.
const devicePlaceholder = "{device}"

var placeholder = regexp.MustCompile(`\{([^{}]*)\}`)

// deviceRE is what {device} matches: a valid device name (manifest's rule
// for agent.yaml's device), so hidden folders such as .github never match.
const deviceRE = `[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`

// labelRE is what {label:KEY} matches: one segment that is not hidden.
const labelRE = `[^/.][^/]*`

// pattern is a slash-separated path or ref in which placeholders stand for
// parts of one segment.
type pattern struct {
	raw    string
	segs   []segment
	device bool // contains {device}
}

// segment is one element of a pattern: a literal name or a regular
// expression, with the submatch that is the device name.
type segment struct {
	literal string
	re      *regexp.Regexp // nil for a literal
	device  int            // index of the {device} submatch; 0 for none
}

// parsePattern parses a path (isPath: relative, cleaned, "" or "." for the
// repo root) or a ref pattern; flag names it in errors.
func parsePattern(flag, raw string, isPath bool) (pattern, error) {
	p := pattern{raw: raw}
	s := raw
	if isPath {
		s = strings.ReplaceAll(s, "\\", "/")
		if strings.HasPrefix(s, "/") {
			return p, fmt.Errorf("%w: %s %q must be relative to the repository root", ErrBadPattern, flag, raw)
		}
		for _, elem := range strings.Split(s, "/") {
			if elem == ".." {
				return p, fmt.Errorf("%w: %s %q must not contain \"..\"", ErrBadPattern, flag, raw)
			}
		}
		if s = path.Clean(s); s == "." {
			return p, nil
		}
	}
	if n := strings.Count(s, devicePlaceholder); n > 1 {
		return p, fmt.Errorf("%w: %s %q has {device} %d times; use it once", ErrBadPattern, flag, raw, n)
	}
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		if m[1] != "device" && !strings.HasPrefix(m[1], "label:") {
			return p, fmt.Errorf("%w: %s %q has unknown placeholder %s: use {device} or {label:KEY}", ErrBadPattern, flag, raw, m[0])
		}
	}
	for _, elem := range strings.Split(s, "/") {
		seg, err := parseSegment(elem)
		if err != nil {
			return p, fmt.Errorf("%w: %s %q: %v", ErrBadPattern, flag, raw, err)
		}
		p.device = p.device || seg.device > 0
		p.segs = append(p.segs, seg)
	}
	return p, nil
}

func parseSegment(elem string) (segment, error) {
	locs := placeholder.FindAllStringIndex(elem, -1)
	if len(locs) == 0 {
		return segment{literal: elem}, nil
	}
	var b strings.Builder
	b.WriteString("^")
	seg := segment{}
	last, group := 0, 0
	for _, l := range locs {
		b.WriteString(regexp.QuoteMeta(elem[last:l[0]]))
		if elem[l[0]:l[1]] == devicePlaceholder {
			group++
			seg.device = group
			b.WriteString("(" + deviceRE + ")")
		} else {
			b.WriteString(labelRE)
		}
		last = l[1]
	}
	b.WriteString(regexp.QuoteMeta(elem[last:]) + "$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return seg, err
	}
	seg.re = re
	return seg, nil
}

// match reports whether name matches the segment, and the device name it
// holds ("" when the segment has no {device}).
func (s segment) match(name string) (device string, ok bool) {
	if s.re == nil {
		return "", name == s.literal
	}
	m := s.re.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	if s.device > 0 {
		device = m[s.device]
	}
	return device, true
}

// matchRef matches a whole ref (branch name) against the pattern and
// returns the device name in it.
func (p pattern) matchRef(ref string) (string, bool) {
	elems := strings.Split(ref, "/")
	if len(elems) != len(p.segs) {
		return "", false
	}
	device := ""
	for i, s := range p.segs {
		d, ok := s.match(elems[i])
		if !ok {
			return "", false
		}
		if d != "" {
			device = d
		}
	}
	return device, p.device
}

// expand returns the pattern with {device} replaced by name.
func (p pattern) expand(name string) string {
	return strings.ReplaceAll(p.raw, devicePlaceholder, name)
}
