package hub

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/api"
)

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"deref": func(p *int) int { return *p },
	"short": api.ShortRevision,
	"key":   func(k string) string { return api.ReleaseKey(k).Short() },
}).ParseFS(templateFS, "templates/*.html"))

// render writes page name; html/template escapes every value it prints,
// so device names and labels show as text, whatever they hold.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.fail(w, r, fmt.Errorf("render %s: %w", name, err), false)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

type column struct {
	Title, Key, Href, Arrow string
}

type fleetPage struct {
	States     []string
	List       DeviceList
	Releases   []Release
	RelStates  []string
	Columns    []column
	Sort       string
	Error      string
	From, To   int
	Prev, Next string
}

func (s *Server) pageFleet(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	p := fleetPage{States: api.States, RelStates: api.ReleaseStates[:len(api.ReleaseStates)-1]}
	l, bad, err := s.deviceList(r)
	if err != nil && !bad {
		s.fail(w, r, err, false)
		return
	}
	if err != nil {
		// The page says what was wrong with the query, and lists every device.
		p.Error = err.Error()
		all, err2 := s.store.Devices(r.Context())
		if err2 != nil {
			s.fail(w, r, err2, false)
			return
		}
		l, _ = list(all, Query{Sort: "name", Limit: DefaultPageSize})
		v = url.Values{}
	}
	p.List = l
	q, _ := parseQuery(v)
	p.Sort = q.Sort
	link := func(change func(url.Values)) string {
		c := url.Values{}
		for k, vs := range v {
			c[k] = vs
		}
		change(c)
		return "/?" + c.Encode()
	}
	for _, c := range []struct{ title, key string }{
		{"device", "name"}, {"labels", ""}, {"applied", "applied"}, {"target", "target"}, {"state", "state"},
		{"held", ""}, {"wave", "wave"}, {"last seen", "lastSeen"}, {"last error", ""},
	} {
		col := column{Title: c.title, Key: c.key}
		if c.key != "" {
			order := "asc"
			if q.Sort == c.key {
				col.Arrow = " ▲"
				if !q.Desc {
					order = "desc"
				} else {
					col.Arrow = " ▼"
				}
			}
			col.Href = link(func(c2 url.Values) { c2.Set("sort", c.key); c2.Set("order", order); c2.Del("offset") })
		}
		p.Columns = append(p.Columns, col)
	}
	p.From, p.To = l.Offset+1, l.Offset+len(l.Devices)
	if l.Offset > 0 {
		p.Prev = link(func(c url.Values) { c.Set("offset", strconv.Itoa(max(0, l.Offset-q.Limit))) })
	}
	if l.Offset+len(l.Devices) < l.Total {
		p.Next = link(func(c url.Values) { c.Set("offset", strconv.Itoa(l.Offset+len(l.Devices))) })
	}
	if p.Releases, err = s.store.Releases(r.Context(), 10); err != nil {
		s.fail(w, r, err, false)
		return
	}
	s.render(w, r, "fleet.html", p)
}

func (s *Server) pageDevice(w http.ResponseWriter, r *http.Request) {
	d, err := s.store.Device(r.Context(), r.PathValue("name"), recentEvents)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	s.render(w, r, "device.html", struct{ D DeviceDetail }{d})
}

func (s *Server) pageRelease(w http.ResponseWriter, r *http.Request) {
	rd, err := s.release(r)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	s.render(w, r, "release.html", struct {
		R      ReleaseDetail
		States []string
		Chart  template.HTML
	}{rd, api.ReleaseStates, convergenceChart(rd)})
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 640, 240
	chartPad       = 40
)

var waveColours = []string{"#0550ae", "#1a7f37", "#8a5a00", "#6639ba", "#b00020", "#116329"}

// convergenceChart draws, per wave, the share of its devices that applied
// the release against the time since the fleet first saw it: a step line
// each, as inline SVG. It prints numbers only: nothing a device sent.
func convergenceChart(rd ReleaseDetail) template.HTML {
	type series struct {
		label  string
		total  int
		points []float64 // seconds after first sight, sorted
	}
	byWave := map[int]*series{}
	maxT := 1.0
	for _, p := range rd.DeviceParts {
		if p.State == StateSuperseded {
			continue
		}
		w := -1
		if p.Wave != nil {
			w = *p.Wave
		}
		s := byWave[w]
		if s == nil {
			s = &series{label: "no wave named"}
			if w >= 0 {
				s.label = "wave " + strconv.Itoa(w)
			}
			byWave[w] = s
		}
		s.total++
		if p.Applied != "" {
			s.points = append(s.points, p.AfterSeconds)
			maxT = max(maxT, p.AfterSeconds)
		}
	}
	waves := make([]int, 0, len(byWave))
	for w := range byWave {
		waves = append(waves, w)
	}
	sort.Ints(waves)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="convergence" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="convergence chart">`, chartW, chartH, chartW, chartH)
	x0, y0, x1, y1 := chartPad, chartH-chartPad, chartW-chartPad/2, chartPad/2
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, x0, y0, x1, y0, x0, y0, x0, y1)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">100%%</text><text x="%d" y="%d" font-size="11">0</text>`, 4, y1+4, 20, y0+4)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">%s</text>`, x1, chartH-8, secondsLabel(maxT))
	xs := func(t float64) float64 { return float64(x0) + t/maxT*float64(x1-x0) }
	ys := func(share float64) float64 { return float64(y0) - share*float64(y0-y1) }
	for i, w := range waves {
		s := byWave[w]
		sort.Float64s(s.points)
		colour := waveColours[i%len(waveColours)]
		pts := []string{fmt.Sprintf("%.1f,%.1f", xs(0), ys(0))}
		for j, t := range s.points {
			prev := float64(j) / float64(s.total)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(t), ys(prev)), fmt.Sprintf("%.1f,%.1f", xs(t), ys(float64(j+1)/float64(s.total))))
		}
		last := float64(len(s.points)) / float64(s.total)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(maxT), ys(last)))
		fmt.Fprintf(&b, `<polyline class="wave" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, colour, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="%s">%s: %d/%d</text>`, x0+8, y1+14*(i+1), colour, template.HTMLEscapeString(s.label), len(s.points), s.total)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func secondsLabel(s float64) string {
	switch {
	case s >= 2*86400:
		return fmt.Sprintf("%.1f d", s/86400)
	case s >= 2*3600:
		return fmt.Sprintf("%.1f h", s/3600)
	case s >= 120:
		return fmt.Sprintf("%.0f min", s/60)
	}
	return fmt.Sprintf("%.0f s", s)
}
