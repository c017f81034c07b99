package planner

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIDs(t *testing.T) {
	require.Equal(t, "file/etc/infer/config.yaml", FileID("/etc/infer/config.yaml"))
	require.Equal(t, "/etc/infer/config.yaml", FilePath("file/etc/infer/config.yaml"))
	require.Equal(t, "model/detector", ModelID("detector"))
	require.Equal(t, "detector", ModelName("model/detector"))
	require.Equal(t, "service/infer", ServiceID("infer"))
	require.Equal(t, "infer", ServiceName("service/infer"))
	for id, want := range map[string]Kind{"file/etc/x": KindFile, "model/m": KindModel, "service/s": KindService} {
		k, err := KindOf(id)
		require.NoError(t, err)
		require.Equal(t, want, k)
	}
	_, err := KindOf("volume/x")
	require.ErrorContains(t, err, `resource id "volume/x": unknown resource kind "volume"`)
}

func TestDriftJSON(t *testing.T) {
	a := Action{Type: Update, Resource: "file/etc/a", Reason: "drift: mode changed on node", Drift: "mode changed on node"}
	b, err := json.Marshal(a)
	require.NoError(t, err)
	require.JSONEq(t, `{"action":"update","resource":"file/etc/a","reason":"drift: mode changed on node","drift":true}`, string(b))
	b, err = json.Marshal(Action{Type: Create, Resource: "file/etc/a", Reason: "declared"})
	require.NoError(t, err)
	require.NotContains(t, string(b), "drift", "no drift, no field")

	var back Action
	require.NoError(t, json.Unmarshal([]byte(`{"action":"update","drift":true}`), &back))
	require.True(t, back.IsDrift())
	require.Error(t, json.Unmarshal([]byte(`{"drift":"yes"}`), &back))
}
