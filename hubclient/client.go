package hubclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/printable"
)

// maxReadBytes caps what the client reads of one hub answer.
const maxReadBytes = 64 << 20

// Client reads a hub's JSON answers, as tend fleet does.
type Client struct {
	URL   string // the hub's base URL
	Token string // the read token; "" for a hub with --public-read
	HTTP  *http.Client
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	base, err := url.Parse(c.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("--hub %q is not an http(s) URL: use e.g. https://hub.example:8420", c.URL)
	}
	u := strings.TrimSuffix(base.String(), "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("ask the hub: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", u, err)
	}
	if len(body) > maxReadBytes {
		return fmt.Errorf("the answer of %s exceeds %d bytes", u, maxReadBytes)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the hub %s wants its read token: give --read-token-file FILE", c.URL)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s answered %d: %s", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: not a hub's answer: %w", u, err)
	}
	return nil
}

// Devices reads every device the selector matches, page by page.
func (c *Client) Devices(ctx context.Context, selector string) (api.DeviceList, error) {
	var all api.DeviceList
	for offset := 0; ; {
		q := url.Values{"limit": {fmt.Sprint(api.MaxPageSize)}, "offset": {fmt.Sprint(offset)}}
		if selector != "" {
			q.Set("selector", selector)
		}
		var page api.DeviceList
		if err := c.get(ctx, "/v1/devices?"+q.Encode(), &page); err != nil {
			return all, err
		}
		if offset == 0 {
			all = page
		} else {
			all.Devices = append(all.Devices, page.Devices...)
		}
		offset += len(page.Devices)
		if len(page.Devices) == 0 || offset >= page.Total {
			return all, nil
		}
	}
}

// Release reads the release name names: a release key, a commit (a
// unique prefix of its hash, bare or as REF@sha1:HASH), or
// model/NAME@DIGEST|TAG (service/NAME@…), as DESIGN.md's hub section says.
func (c *Client) Release(ctx context.Context, name string) (api.ReleaseDetail, error) {
	var rd api.ReleaseDetail
	err := c.get(ctx, "/v1/releases/"+url.PathEscape(name), &rd)
	return rd, err
}

// WriteDevices prints the device table for people.
func WriteDevices(w io.Writer, l api.DeviceList) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tSTATE\tAPPLIED\tTARGET\tWAVE\tLAST SEEN\tLABELS\tWHY")
	for _, d := range l.Devices {
		wave := "-"
		if d.Wave != nil {
			wave = fmt.Sprint(*d.Wave)
		}
		why := d.Held
		if d.LastError != "" {
			why = d.LastError
		}
		keys := make([]string, 0, len(d.Labels))
		for k := range d.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		labels := make([]string, 0, len(keys))
		for _, k := range keys {
			labels = append(labels, k+"="+d.Labels[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable.OneLine(d.Name), d.State, api.ShortRevision(d.Applied), d.TargetShown(), wave,
			d.LastSeen, printable.OneLine(strings.Join(labels, ",")), printable.OneLine(why))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var counts []string
	for _, st := range api.States {
		if n := l.Counts[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, st))
		}
	}
	_, err := fmt.Fprintf(w, "%d device(s): %s\n", l.Total, strings.Join(counts, ", "))
	return err
}

// Verdict is how a release stands: every targeted device applied it, it
// is in progress, or a device rolled it back.
type Verdict int

// Verdicts, with tend fleet release's exit codes.
const (
	VerdictApplied    Verdict = 0
	VerdictFailed     Verdict = 1
	VerdictInProgress Verdict = 2
)

// ReleaseVerdict judges rd.
func ReleaseVerdict(rd api.ReleaseDetail) Verdict {
	if rd.Counts[api.StateFailed] > 0 {
		return VerdictFailed
	}
	if rd.Devices > 0 && rd.Counts[api.StateApplied] == rd.Devices {
		return VerdictApplied
	}
	return VerdictInProgress
}

// shownFailures bounds the failed devices WriteRelease names one by one.
const shownFailures = 20

// WriteRelease prints a release's progress per wave for people, and, when
// devices rolled it back, what each rolled back and why.
func WriteRelease(w io.Writer, rd api.ReleaseDetail) error {
	name := rd.Key
	if tags := rd.Tags(); len(tags) > 0 {
		name += " (" + strings.Join(tags, ", ") + ")"
	}
	fmt.Fprintf(w, "Release %s, first seen %s at %s: %d device(s).\n", printable.OneLine(name), rd.FirstSeen, printable.OneLine(rd.Revision), rd.Devices)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tDEVICES\tAPPLIED\tFAILED\tHELD\tSTAGING\tERROR\tPENDING")
	for _, wv := range rd.Waves {
		name := "-"
		if wv.Wave != nil {
			name = fmt.Sprint(*wv.Wave)
		}
		c := wv.Counts
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, wv.Devices, c[api.StateApplied], c[api.StateFailed], c[api.StateHeld], c[api.StateStaging], c[api.StateError], c[api.StatePending])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := rd.Counts[api.StateUnreported]; n > 0 {
		if _, commit := api.ReleaseKey(rd.Key).Commit(); commit {
			fmt.Fprintf(w, "%d device(s) following its ref have not reported it yet.\n", n)
		} else {
			fmt.Fprintf(w, "%d device(s) following its ref, running its models or services, have not reported it yet.\n", n)
		}
	}
	var failed []api.ReleaseDevice
	for _, p := range rd.DeviceParts {
		if p.State == api.StateFailed {
			failed = append(failed, p)
		}
	}
	var err error
	switch ReleaseVerdict(rd) {
	case VerdictApplied:
		_, err = fmt.Fprintln(w, "Applied by every device it targets.")
	case VerdictFailed:
		fmt.Fprintf(w, "Failed: rolled back on %d device(s):\n", len(failed))
		for i, p := range failed {
			if i == shownFailures {
				fmt.Fprintf(w, "  and %d more\n", len(failed)-i)
				break
			}
			wave := ""
			if p.Wave != nil {
				wave = fmt.Sprintf(" (wave %d)", *p.Wave)
			}
			detail := p.Detail
			if detail == "" {
				detail = "rolled back " + api.ReleaseName(api.ReleaseKey(rd.Key), rd.Revision)
			}
			_, err = fmt.Fprintf(w, "  %s%s %s\n", printable.OneLine(p.Device), wave, printable.OneLine(detail))
		}
	default:
		_, err = fmt.Fprintf(w, "In progress: %d of %d applied.\n", rd.Counts[api.StateApplied], rd.Devices)
	}
	return err
}
