package api

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func intp(n int) *int { return &n }

// What the agent encodes, the hub parses back whole. (rollout's
// TestBrakesQuery checks every brakes field of a Rollout is in it.)
func TestVerdictQueryRoundTrip(t *testing.T) {
	every := VerdictQuery{Release: ReleaseKey("model/m@sha256:" + strings.Repeat("ab", 32)), Revision: "main@sha1:ab12", Rollout: "cameras", Before: 2,
		Thresholds: Thresholds{MaxFailed: intp(0), MaxFailedPercent: intp(10), MinApplied: 3, Soak: 10 * time.Minute}}
	th := reflect.ValueOf(every.Thresholds)
	for i := range th.NumField() {
		require.False(t, th.Field(i).IsZero(), "set %s in this test, so that the round trip covers it", th.Type().Field(i).Name)
	}
	require.Equal(t, "before=2&maxFailed=0&maxFailedPercent=10&minApplied=3&release=model%2Fm%40sha256%3A"+strings.Repeat("ab", 32)+"&revision=main%40sha1%3Aab12&rollout=cameras&soak=10m0s", every.Encode(),
		"the wire format of DESIGN.md")

	for _, q := range []VerdictQuery{every, {Revision: "main@sha1:ab12", Before: 1}, {Release: "commit:ab12", Before: 1}} {
		v, err := url.ParseQuery(q.Encode())
		require.NoError(t, err)
		got, err := ParseVerdictQuery(v)
		require.NoError(t, err)
		require.Equal(t, q, got)
	}
}

func TestParseVerdictQueryRefuses(t *testing.T) {
	for q, want := range map[string]string{
		"before=1": "release: missing: the key of the release asked about (or revision, ref@sha1:commit, its commit's)",
		"release=main%40sha1%3Aab12&before=1": `release: release key "main@sha1:ab12": part "main@sha1:ab12" is not a digest's key: ` +
			"use commit:HASH, or model/NAME@sha256:HEX (service/NAME@sha256:HEX), several joined with +",
		"revision=r":                               "before: missing: the asking device's wave; waves 0 to before-1 are counted",
		"revision=r&before=0":                      `before "0": use a whole number from 1 to 1048576`,
		"revision=r&before=1&maxFailed=-1":         `maxFailed "-1": use a whole number from 0 to 1073741824`,
		"revision=r&before=1&maxFailedPercent=101": `maxFailedPercent "101": use a whole number from 0 to 100`,
		"revision=r&before=1&minApplied=x":         `minApplied "x": use a whole number from 0 to 1073741824`,
		"revision=r&before=1&soak=soon":            `soak "soon": use a duration such as 10m`,
		"revision=r&before=1&soak=-1m":             `soak "-1m": use a duration such as 10m`,
		"revision=r&before=1&rollout=a%0Ab":        "rollout: not a rollout's name (metadata.name, at most 253 bytes of printable text)",
		"revision=" + strings.Repeat("r", 1025):    "revision: 1025 bytes, more than 1024: send ref@sha1:commit",
	} {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		_, err = ParseVerdictQuery(v)
		require.EqualError(t, err, want, q)
	}
}

// A tend that sends no key (v0.1.0) asks by revision: its release is its
// commit's, as the hub counts its reports.
func TestVerdictQueryKey(t *testing.T) {
	require.Equal(t, ReleaseKey("commit:ab12"), VerdictQuery{Revision: "main@sha1:AB12"}.Key())
	require.Equal(t, ReleaseKey("commit:cd"), VerdictQuery{Release: "commit:cd", Revision: "main@sha1:ab12"}.Key())
}

// FuzzParseVerdictQuery: whatever a client sends, the parse returns an
// error or a query that encodes and parses back to itself, within the
// bounds the hub relies on.
func FuzzParseVerdictQuery(f *testing.F) {
	for _, seed := range []string{
		"before=2&maxFailed=0&maxFailedPercent=10&minApplied=3&release=model%2Fm%40sha256%3A" + strings.Repeat("ab", 32) + "&revision=main%40sha1%3Aab12&rollout=cameras&soak=10m0s",
		"revision=main%40sha1%3Aab12&before=1",
		"release=commit%3Aab12+commit%3Acd&before=1",
		"release=model%2Fa%40sha256%3A" + strings.Repeat("0", 64) + "%2Bservice%2Fb%40sha256%3A" + strings.Repeat("1", 64) + "&before=3&soak=1h",
		"before=1&rollout=%FF",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseVerdictQuery(v)
		if err != nil {
			return
		}
		if q.Before < 1 || len(q.Rollout) > maxNameBytes || len(q.Revision) > maxRevisionBytes || q.Key() == "" {
			t.Fatalf("%q parsed out of bounds: %+v", raw, q)
		}
		again, err := url.ParseQuery(q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseVerdictQuery(again)
		if err != nil {
			t.Fatalf("%q: its own encoding %q does not parse: %v", raw, q.Encode(), err)
		}
		if !reflect.DeepEqual(back, q) {
			t.Fatalf("%q: %+v encodes and parses back as %+v", raw, q, back)
		}
	})
}
