package rollout

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// Buckets of the device names the tests use: cam-017 5, cam-001 11,
// cam-005 14, cam-003 35, cam-002 37, cam-004 91.

func waves() []manifest.Wave {
	return []manifest.Wave{
		{Selector: &manifest.Selector{MatchLabels: map[string]string{"ring": "canary"}}},
		{Percent: 10, After: manifest.Duration(time.Hour)},
		{Percent: 50, After: manifest.Duration(6 * time.Hour)},
	}
}

func TestWave(t *testing.T) {
	r := &manifest.Rollout{Spec: manifest.RolloutSpec{Selector: &manifest.Selector{}, Waves: waves()}}
	canary := map[string]string{"ring": "canary"}
	tests := []struct {
		name   string
		device string
		labels map[string]string
		index  int
		after  time.Duration
	}{
		{"by selector, whatever the bucket", "cam-004", canary, 0, 0},
		{"by hash, first percent", "cam-017", nil, 1, time.Hour},
		{"by hash, bucket equal to a percent is in the next", "cam-001", nil, 2, 6 * time.Hour},
		{"by hash, under the last percent", "cam-002", map[string]string{"ring": "main"}, 2, 6 * time.Hour},
		{"by hash, past the last percent", "cam-004", nil, NoWave, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, after := Wave(tt.device, tt.labels, r)
			require.Equal(t, tt.index, i)
			require.Equal(t, tt.after, after)
		})
	}
	t.Run("a rollout without waves is one open wave", func(t *testing.T) {
		i, after := Wave("cam-004", nil, &manifest.Rollout{Spec: manifest.RolloutSpec{Selector: &manifest.Selector{}}})
		require.Equal(t, 0, i)
		require.Zero(t, after)
	})
}

// readmeBucket is the README's shell one-liner for a device's bucket.
const readmeBucket = `echo "ibase=16; $(printf %s "$1" | sha256sum | cut -c1-16 | tr a-f A-F) % 64" | bc`

func TestBucketAsTheREADMESays(t *testing.T) {
	for _, tool := range []string{"sh", "sha256sum", "bc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed here, so the README's one-liner cannot run", tool)
		}
	}
	for _, d := range []string{"cam-017", "cam-004", "ÜBER-device", "a"} {
		out, err := exec.Command("sh", "-c", readmeBucket, "sh", d).Output()
		require.NoError(t, err)
		got, err := strconv.Atoi(strings.TrimSpace(string(out)))
		require.NoError(t, err)
		require.Equal(t, Bucket(d), got, d)
	}
}

func window(t *testing.T, schedule string, d time.Duration, zone string) *manifest.Window {
	t.Helper()
	c, err := cron.ParseStandard(schedule)
	require.NoError(t, err)
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	return &manifest.Window{Schedule: schedule, Duration: manifest.Duration(d), TimeZone: zone, Cron: c, Location: loc}
}

func TestDecide(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		require.NoError(t, err)
		return v
	}
	seen := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	rollout := func(paused bool, w *manifest.Window) *manifest.Rollout {
		return &manifest.Rollout{Metadata: manifest.ProfileMetadata{Name: "default"},
			Spec: manifest.RolloutSpec{Selector: &manifest.Selector{}, Waves: waves(), Paused: paused, Window: w}}
	}
	nightly := window(t, "0 2 * * *", 3*time.Hour, "Europe/Berlin")
	lateEvening := window(t, "0 23 * * *", 3*time.Hour, "Europe/Berlin")
	early := window(t, "0 1 * * *", 3*time.Hour, "Europe/Berlin")
	weekly := window(t, "0 2 * * 1", time.Hour, "Europe/Berlin")
	never := window(t, "0 2 30 2 *", 24*time.Hour, "Europe/Berlin") // 30 February: robfig's Next is zero
	canary := map[string]string{"ring": "canary"}
	tests := []struct {
		name   string
		r      *manifest.Rollout
		now    time.Time
		device string
		labels map[string]string
		want   Decision
	}{
		{"no rollout takes at once", nil, seen, "cam-004", nil, Decision{Take: true}},
		{"canary takes at once", rollout(false, nil), seen, "cam-004", canary, Decision{Take: true, Wave: 0}},
		{"wave 1 before its after", rollout(false, nil), seen.Add(59 * time.Minute), "cam-017", nil,
			Decision{Cause: CauseWave, Reason: "held: rollout wave 1 opens 2026-12-03T14:00Z", Wave: 1, Opens: seen.Add(time.Hour)}},
		{"wave 1 once its after elapsed", rollout(false, nil), seen.Add(time.Hour), "cam-017", nil, Decision{Take: true, Wave: 1}},
		{"wave 2 before its after", rollout(false, nil), seen, "cam-002", nil,
			Decision{Cause: CauseWave, Reason: "held: rollout wave 2 opens 2026-12-03T19:00Z", Wave: 2, Opens: seen.Add(6 * time.Hour)}},
		{"in no wave", rollout(false, nil), seen.Add(1000 * time.Hour), "cam-004", nil,
			Decision{Cause: CauseWave, Reason: "held: in no wave of rollout/default (the device's bucket, 91, is past its last percent)", Wave: NoWave}},
		{"paused holds even a canary", rollout(true, nil), seen, "cam-004", canary,
			Decision{Cause: CausePaused, Reason: "held: rollout paused", Wave: 0}},
		{"window closed", rollout(false, nightly), at("2026-12-03 14:00"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: "held: outside maintenance window (opens 02:00 Europe/Berlin)", Opens: at("2026-12-04 02:00")}},
		{"window that never opens", rollout(false, never), at("2026-12-04 02:30"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: `held: maintenance window "0 2 30 2 *" never opens; fix spec.window.schedule of rollout/default`}},
		{"window open", rollout(false, nightly), at("2026-12-04 04:59"), "cam-004", canary, Decision{Take: true}},
		{"window closed at its end", rollout(false, nightly), at("2026-12-04 05:00"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: "held: outside maintenance window (opens 02:00 Europe/Berlin)", Opens: at("2026-12-05 02:00")}},
		{"window open across midnight", rollout(false, lateEvening), at("2026-12-04 01:30"), "cam-004", canary, Decision{Take: true}},
		{"window closed after midnight", rollout(false, lateEvening), at("2026-12-04 02:00"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: "held: outside maintenance window (opens 23:00 Europe/Berlin)", Opens: at("2026-12-04 23:00")}},
		// 01:00 CET is 00:00Z; clocks go from 02:00 to 03:00, so at 04:30
		// CEST only 2h30 have passed: the duration is elapsed time.
		{"window open across the spring DST change", rollout(false, early), at("2026-03-29 04:30"), "cam-004", canary, Decision{Take: true}},
		{"window closed after 3h across the spring DST change", rollout(false, early), at("2026-03-29 05:00"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: "held: outside maintenance window (opens 01:00 Europe/Berlin)", Opens: at("2026-03-30 01:00")}},
		// clocks go from 03:00 back to 02:00: 01:00 CEST is 23:00Z, so at
		// 03:30 CET (02:30Z) 3h30 have passed, not 2h30.
		{"window open across the autumn DST change", rollout(false, early), at("2026-10-25 02:59"), "cam-004", canary, Decision{Take: true}},
		{"window closed across the autumn DST change", rollout(false, early), at("2026-10-25 03:30"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: "held: outside maintenance window (opens 01:00 Europe/Berlin)", Opens: at("2026-10-26 01:00")}},
		{"a window days away names its date", rollout(false, weekly), at("2026-12-03 14:00"), "cam-004", canary,
			Decision{Cause: CauseWindow, Reason: "held: outside maintenance window (opens 2026-12-07 02:00 Europe/Berlin)", Opens: at("2026-12-07 02:00")}},
		{"a wave that has not opened is said before the window", rollout(false, nightly), at("2026-12-03 14:30"), "cam-017", nil,
			Decision{Cause: CauseWave, Reason: "held: rollout wave 1 opens 2026-12-03T14:00Z", Wave: 1, Opens: seen.Add(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.now, seen, tt.device, tt.labels, tt.r)
			require.True(t, tt.want.Opens.Equal(got.Opens), "opens %s, want %s", got.Opens, tt.want.Opens)
			got.Opens, tt.want.Opens = time.Time{}, time.Time{}
			require.Equal(t, tt.want, got)
		})
	}
}

// A wave that opens within a second names the next whole second, never
// one before it opens.
func TestReasonRoundsUp(t *testing.T) {
	seen := time.Date(2026, 12, 3, 13, 59, 59, 400_000_000, time.UTC)
	r := &manifest.Rollout{Spec: manifest.RolloutSpec{Waves: []manifest.Wave{{Percent: 100, After: manifest.Duration(3 * time.Second)}}}}
	d := Decide(seen, seen, "cam-017", nil, r)
	require.Equal(t, "held: rollout wave 0 opens 2026-12-03T14:00:03Z", d.Reason)
	require.Equal(t, seen.Add(3*time.Second), d.Opens)
}
