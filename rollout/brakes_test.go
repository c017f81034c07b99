package rollout

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/manifest"
)

func intp(n int) *int { return &n }

// Every brakes field of a Rollout but the hub's URL and onHubDown
// travels in the query (api.VerdictQuery's round trip covers the rest).
func TestBrakesQuery(t *testing.T) {
	b := &manifest.Brakes{Hub: "https://hub.example:8420", MaxFailed: intp(0), MaxFailedPercent: intp(10),
		MinApplied: 3, Soak: manifest.Duration(10 * time.Minute), OnHubDown: manifest.OnHubDownHold}
	key := api.ReleaseKey("model/m@sha256:" + strings.Repeat("ab", 32))
	q := BrakesQuery(&manifest.Rollout{Metadata: manifest.ProfileMetadata{Name: "cameras"}, Spec: manifest.RolloutSpec{Brakes: b}}, 2, key, "main@sha1:ab12")
	require.Equal(t, api.VerdictQuery{Release: key, Revision: "main@sha1:ab12", Rollout: "cameras", Before: 2,
		Thresholds: api.Thresholds{MaxFailed: intp(0), MaxFailedPercent: intp(10), MinApplied: 3, Soak: 10 * time.Minute}}, q)
	th := reflect.TypeFor[api.Thresholds]()
	bt := reflect.TypeFor[manifest.Brakes]()
	for i := range bt.NumField() {
		if name := bt.Field(i).Name; name != "Hub" && name != "OnHubDown" {
			_, ok := th.FieldByName(name)
			require.True(t, ok, "Brakes.%s is not in api.Thresholds: the hub would never see it", name)
		}
	}
}
