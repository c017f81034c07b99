package hub

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/manifest"
)

// ParseSelector reads a label selector as kubectl's -l takes it:
// comma-separated k=v (or k==v), k!=v, k (has the label) and !k (has not).
func ParseSelector(s string) (manifest.Selector, error) {
	var sel manifest.Selector
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
			continue
		case strings.Contains(part, "!="):
			k, v, _ := strings.Cut(part, "!=")
			if err := checkSelectorKey(k, part); err != nil {
				return sel, err
			}
			sel.MatchExpressions = append(sel.MatchExpressions, manifest.Requirement{Key: strings.TrimSpace(k), Operator: manifest.OpNotIn, Values: []string{strings.TrimSpace(v)}})
		case strings.Contains(part, "="):
			k, v, _ := strings.Cut(part, "=")
			v = strings.TrimPrefix(v, "=")
			if err := checkSelectorKey(k, part); err != nil {
				return sel, err
			}
			if sel.MatchLabels == nil {
				sel.MatchLabels = map[string]string{}
			}
			sel.MatchLabels[strings.TrimSpace(k)] = strings.TrimSpace(v)
		case strings.HasPrefix(part, "!"):
			k := strings.TrimPrefix(part, "!")
			if err := checkSelectorKey(k, part); err != nil {
				return sel, err
			}
			sel.MatchExpressions = append(sel.MatchExpressions, manifest.Requirement{Key: strings.TrimSpace(k), Operator: manifest.OpDoesNotExist})
		default:
			if err := checkSelectorKey(part, part); err != nil {
				return sel, err
			}
			sel.MatchExpressions = append(sel.MatchExpressions, manifest.Requirement{Key: part, Operator: manifest.OpExists})
		}
	}
	return sel, nil
}

func checkSelectorKey(k, part string) error {
	k = strings.TrimSpace(k)
	if k == "" || strings.ContainsAny(k, "=! ()") {
		return fmt.Errorf("selector term %q names no label: use k=v, k!=v, k or !k, comma-separated (site=lyon,hw=orin)", part)
	}
	return nil
}

// Sort keys of the device table.
var sortKeys = map[string]func(a, b Device) int{
	"name":     func(a, b Device) int { return strings.Compare(a.Name, b.Name) },
	"state":    func(a, b Device) int { return stateRank(a.State) - stateRank(b.State) },
	"applied":  func(a, b Device) int { return strings.Compare(a.Applied, b.Applied) },
	"target":   func(a, b Device) int { return strings.Compare(a.Target, b.Target) },
	"lastSeen": func(a, b Device) int { return strings.Compare(a.LastSeen, b.LastSeen) },
	"wave": func(a, b Device) int {
		w := func(d Device) int {
			if d.Wave == nil {
				return -1
			}
			return *d.Wave
		}
		return w(a) - w(b)
	},
}

func stateRank(s string) int {
	for i, st := range api.States {
		if st == s {
			return i
		}
	}
	return len(api.States)
}

// DefaultPageSize is how many devices a page of the table shows.
const DefaultPageSize = 100

// Query is what the device table shows: which devices, in which order,
// which page.
type Query struct {
	Selector string
	Sort     string // a key of sortKeys; default name
	Desc     bool
	Offset   int
	Limit    int
}

// parseQuery reads a Query from ?selector=&sort=&order=&offset=&limit=.
func parseQuery(v url.Values) (Query, error) {
	q := Query{Selector: v.Get("selector"), Sort: v.Get("sort"), Desc: v.Get("order") == "desc", Limit: DefaultPageSize}
	if q.Sort == "" {
		q.Sort = "name"
	}
	if _, ok := sortKeys[q.Sort]; !ok {
		return q, fmt.Errorf("sort=%q: sort by name, state, applied, target, wave or lastSeen", q.Sort)
	}
	for _, p := range []struct {
		name string
		to   *int
		max  int
	}{{"offset", &q.Offset, 1 << 30}, {"limit", &q.Limit, api.MaxPageSize}} {
		if s := v.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > p.max {
				return q, fmt.Errorf("%s=%q: use a whole number from 0 to %d", p.name, s, p.max)
			}
			*p.to = n
		}
	}
	if q.Limit == 0 {
		q.Limit = DefaultPageSize
	}
	return q, nil
}

// list selects, sorts and pages devices by q.
func list(all []Device, q Query) (DeviceList, error) {
	sel, err := ParseSelector(q.Selector)
	if err != nil {
		return DeviceList{}, err
	}
	out := DeviceList{FormatVersion: "1", Selector: q.Selector, Counts: map[string]int{}, Offset: q.Offset, Devices: []Device{}}
	var matched []Device
	for _, d := range all {
		if sel.Matches(d.Labels) {
			matched = append(matched, d)
			out.Counts[d.State]++
		}
	}
	for _, st := range api.States {
		out.Counts[st] += 0
	}
	cmp := sortKeys[q.Sort]
	sort.SliceStable(matched, func(i, j int) bool {
		c := cmp(matched[i], matched[j])
		if c == 0 {
			c = strings.Compare(matched[i].Name, matched[j].Name)
			return c < 0
		}
		if q.Desc {
			return c > 0
		}
		return c < 0
	})
	out.Total = len(matched)
	if q.Offset < len(matched) {
		out.Devices = matched[q.Offset:min(len(matched), q.Offset+q.Limit)]
	}
	return out, nil
}
