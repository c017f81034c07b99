package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const rolloutDoc = `apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: default}
spec:
  selector: {matchLabels: {site: plant-a}}
  waves:
    - selector: {matchLabels: {ring: canary}}
    - {percent: 10, after: 1h}
    - {percent: 100, after: 24h}
  window: {schedule: "0 2 * * *", duration: 3h, timeZone: Europe/Berlin}
`

const camDoc = `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017, labels: {site: plant-a}}
spec: {}
`

func TestRolloutGoverns(t *testing.T) {
	inputs := []Input{{Name: "rollout.yaml", Data: []byte(rolloutDoc)}, {Name: "devices/cam-017/device.yaml", Data: []byte(camDoc)}}
	t.Run("by the device document's labels", func(t *testing.T) {
		c, err := Compose(inputs, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.NoError(t, err)
		require.NotNil(t, c.Rollout)
		r := c.Rollout
		require.Equal(t, "default", r.Metadata.Name)
		require.Len(t, r.Spec.Waves, 3)
		require.Equal(t, map[string]string{"ring": "canary"}, r.Spec.Waves[0].Selector.MatchLabels)
		require.Equal(t, 10, r.Spec.Waves[1].Percent)
		require.Equal(t, time.Hour, r.Spec.Waves[1].After.D())
		require.Equal(t, "Europe/Berlin", r.Spec.Window.Location.String())
		require.NotNil(t, r.Spec.Window.Cron)
		require.Equal(t, 3*time.Hour, r.Spec.Window.Duration.D())
		require.Equal(t, "rollout.yaml", r.Origin.File)
	})
	t.Run("by the agent config's labels", func(t *testing.T) {
		dev := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-018}\nspec: {}\n"
		c, err := Compose([]Input{inputs[0], {Name: "d.yaml", Data: []byte(dev)}},
			ComposeOptions{Device: "cam-018", Labels: map[string]string{"site": "plant-a"}, ValidateOptions: allow})
		require.NoError(t, err)
		require.NotNil(t, c.Rollout)
	})
	t.Run("none selects the device", func(t *testing.T) {
		dev := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-019, labels: {site: plant-b}}\nspec: {}\n"
		c, err := Compose([]Input{inputs[0], {Name: "d.yaml", Data: []byte(dev)}}, ComposeOptions{Device: "cam-019", ValidateOptions: allow})
		require.NoError(t, err)
		require.Nil(t, c.Rollout)
	})
	t.Run("two select the device", func(t *testing.T) {
		other := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: all}\nspec:\n  selector: {}\n"
		_, err := Compose(append(inputs, Input{Name: "all.yaml", Data: []byte(other)}), ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.EqualError(t, err, `rollout.yaml:5: spec.selector: rollout/default and rollout/all (all.yaml:5) both select device cam-017 (labels site=plant-a): a device follows one rollout; narrow their selectors`)
		require.ErrorIs(t, err, ErrInvalid)
	})
	t.Run("a rollout file of no concern to the device's name is read", func(t *testing.T) {
		// the device reads every shared file: a Rollout names no device.
		c, err := Compose(inputs, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.NoError(t, err)
		require.NotNil(t, c.Rollout)
	})
}

func TestBadRollout(t *testing.T) {
	const twoWaves = "  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100, after: 1h}\n"
	head := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  selector: {}\n"
	tests := []struct{ name, spec, want string }{
		{"bad cron", `  window: {schedule: "0 25 * * *", duration: 1h}` + "\n",
			`r.yaml:6: spec.window.schedule: invalid schedule "0 25 * * *": end of range (25) above maximum (23): 25; use a cron spec such as "0 2 * * *" (02:00 every day)`},
		{"schedule that never fires", `  window: {schedule: "0 2 30 2 *", duration: 1h}` + "\n",
			`r.yaml:6: spec.window.schedule: schedule "0 2 30 2 *" opens the window less than once a year (or never: a day no month has); use a cron spec such as "0 2 * * *" (02:00 every day)`},
		{"schedule every fourth year", `  window: {schedule: "0 2 29 2 *", duration: 1h}` + "\n",
			`r.yaml:6: spec.window.schedule: schedule "0 2 29 2 *" opens the window less than once a year (or never: a day no month has); use a cron spec such as "0 2 * * *" (02:00 every day)`},
		{"unknown time zone", "  window:\n    schedule: \"0 2 * * *\"\n    duration: 1h\n    timeZone: Europe/Gotham\n",
			`r.yaml:9: spec.window.timeZone: unknown time zone "Europe/Gotham": use an IANA name such as Europe/Berlin, or UTC`},
		{"window without duration", "  window: {schedule: \"0 2 * * *\"}\n",
			`r.yaml:6: spec.window.duration: missing: how long the window stays open, e.g. 3h`},
		{"percent over 100", "  waves:\n    - {percent: 10}\n    - {percent: 101}\n",
			`r.yaml:8: spec.waves[1].percent: percent 101 is out of range: use 1 to 100 (or a selector for a named group)`},
		{"percent zero", "  waves:\n    - {after: 1h}\n",
			`r.yaml:7: spec.waves[0].percent: percent 0 is out of range: use 1 to 100 (or a selector for a named group)`},
		{"percent decreasing", "  waves:\n    - {percent: 50}\n    - {percent: 10}\n",
			`r.yaml:8: spec.waves[1].percent: percent 10 does not increase on the wave before (50): percents are cumulative, e.g. 10, 50, 100`},
		{"after decreasing", "  waves:\n    - {percent: 10, after: 2h}\n    - {percent: 50, after: 1h}\n",
			`r.yaml:8: spec.waves[1].after: after 1h0m0s is earlier than the wave before (2h0m0s): a later wave opens no sooner`},
		{"selector and percent", "  waves:\n    - {selector: {}, percent: 10}\n",
			`r.yaml:7: spec.waves[0]: a wave has either a selector or a percent, not both: split it into two waves`},
		{"bad wave selector", "  waves:\n    - selector: {matchExpressions: [{key: ring, operator: Has}]}\n",
			`r.yaml:7: spec.waves[0].selector.matchExpressions[0].operator: unknown operator "Has": use In, NotIn, Exists or DoesNotExist`},
		{"gate not http", "  gate: {url: \"ftp://gate.example.com/\"}\n",
			`r.yaml:6: spec.gate.url: invalid gate "ftp://gate.example.com/": use an http:// or https:// URL`},
		{"unknown stage", "  stage: onArrival\n",
			`r.yaml:6: spec.stage: unknown stage "onArrival": use onSight (download a release as soon as it is seen) or onRelease (once the rollout lets it through)`},
		{"brakes hub not http", twoWaves + "  brakes: {hub: hub.example:8420}\n",
			`r.yaml:9: spec.brakes.hub: invalid hub "hub.example:8420": use tend-hub's http:// or https:// URL, e.g. https://hub.example:8420`},
		{"brakes maxFailed negative", twoWaves + "  brakes:\n    hub: https://hub.example\n    maxFailed: -1\n",
			`r.yaml:11: spec.brakes.maxFailed: maxFailed -1 is negative: use 0 (one failure stops later waves) or more`},
		{"brakes percent over 100", twoWaves + "  brakes:\n    hub: https://hub.example\n    maxFailedPercent: 150\n",
			`r.yaml:11: spec.brakes.maxFailedPercent: maxFailedPercent 150 is out of range: use 0 to 100`},
		{"brakes minApplied negative", twoWaves + "  brakes:\n    hub: https://hub.example\n    minApplied: -2\n",
			`r.yaml:11: spec.brakes.minApplied: minApplied -2 is negative: use 0 (no wait) or more`},
		{"brakes soak without minApplied", twoWaves + "  brakes:\n    hub: https://hub.example\n    soak: 10m\n",
			`r.yaml:11: spec.brakes.soak: soak 10m0s waits for no device: set minApplied, the earlier-wave devices that must run the release healthy for soak`},
		{"brakes unknown onHubDown", twoWaves + "  brakes:\n    hub: https://hub.example\n    onHubDown: panic\n",
			`r.yaml:11: spec.brakes.onHubDown: unknown onHubDown "panic": use hold (wait for the hub) or proceed (go on without its verdict)`},
		{"brakes with one wave", "  waves:\n    - {percent: 100}\n  brakes: {hub: https://hub.example}\n",
			`r.yaml:8: spec.brakes: brakes stop later waves on the failures of earlier ones, and this rollout has 1 wave(s): give spec.waves at least two, e.g. a canary selector then 100 percent`},
		{"brakes unknown field", twoWaves + "  brakes: {hub: https://hub.example, maxFailures: 1}\n",
			`r.yaml:9: spec.brakes: unknown field "maxFailures"`},
		{"unknown field", "  wave: []\n",
			`r.yaml:6: spec: unknown field "wave"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFleet([]Input{{Name: "r.yaml", Data: []byte(head + tt.spec)}})
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
	t.Run("missing selector", func(t *testing.T) {
		doc := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec: {paused: true}\n"
		_, err := LoadFleet([]Input{{Name: "r.yaml", Data: []byte(doc)}})
		require.EqualError(t, err, `r.yaml:4: spec.selector: missing: the devices this rollout governs, e.g. {matchLabels: {site: plant-a}}; {} governs every device`)
	})
	t.Run("name twice", func(t *testing.T) {
		_, err := LoadFleet([]Input{{Name: "a.yaml", Data: []byte(head)}, {Name: "b.yaml", Data: []byte(head)}})
		require.EqualError(t, err, `b.yaml:3: metadata.name: rollout/r is declared twice (first at a.yaml:3); rollout names must be unique`)
	})
}

func TestRolloutBrakes(t *testing.T) {
	doc := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  selector: {}\n" +
		"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100, after: 1h}\n" +
		"  brakes:\n    hub: https://hub.example:8420\n    maxFailed: 0\n    maxFailedPercent: 10\n    minApplied: 3\n    soak: 10m\n    onHubDown: proceed\n"
	sh := ParseShared([]Input{{Name: "r.yaml", Data: []byte(doc)}})
	require.NoError(t, sh.Err())
	rs := sh.Rollouts()
	require.Len(t, rs, 1)
	b := rs[0].Spec.Brakes
	require.NotNil(t, b)
	require.Equal(t, "https://hub.example:8420", b.Hub)
	require.NotNil(t, b.MaxFailed)
	require.Equal(t, 0, *b.MaxFailed)
	require.Equal(t, 10, *b.MaxFailedPercent)
	require.Equal(t, 3, b.MinApplied)
	require.Equal(t, 10*time.Minute, b.Soak.D())
	require.Equal(t, OnHubDownProceed, b.OnHubDown)
}
