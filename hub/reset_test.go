package hub

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

// rowsOf counts, table by table, the rows the hub keeps of device.
func rowsOf(t *testing.T, s *Store, device string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"devices", "events", "device_releases", "device_parts", "device_resources", "tokens"} {
		col := "device"
		if table == "devices" {
			col = "name"
		}
		var n int
		require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE `+col+` = $1`, device).Scan(&n))
		out[table] = n
	}
	return out
}

// tend-hub device reset forgets a device, whose next report is then its
// first, whatever its reportSeq; its tokens stay valid; other devices
// and the releases are untouched.
func TestResetDevice(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		ctx := context.Background()
		tok, other := h.token("cam-r"), h.token("cam-s")
		s := h.doc("cam-r", rev1, rev2)
		s.ReportSeq = &api.ReportSeq{Epoch: "e1", Seq: 10}
		s.Resources = append(s.Resources, api.ResourceStatus{ID: "model/detector", State: api.ResourceDrifted, Message: "changed"})
		s.Release = &api.Release{Key: string(api.RevisionRelease(rev2)), Revision: rev2, Resources: detector("1.0.0", digest100)}
		h.report(tok, s)
		h.report(other, h.doc("cam-s", rev1, ""))
		before := rowsOf(t, h.store, "cam-r")
		for _, table := range []string{"devices", "events", "device_releases", "device_parts", "device_resources", "tokens"} {
			require.Positive(t, before[table], "%s holds rows of cam-r before: %v", table, before)
		}
		keptOther := rowsOf(t, h.store, "cam-s")

		found, err := h.store.ResetDevice(ctx, "cam-r")
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, map[string]int{"devices": 0, "events": 0, "device_releases": 0, "device_parts": 0, "device_resources": 0, "tokens": 1},
			rowsOf(t, h.store, "cam-r"), "all but its token gone")
		assert.Equal(t, keptOther, rowsOf(t, h.store, "cam-s"), "another device untouched")
		_, err = h.store.Device(ctx, "cam-r", 10)
		assert.True(t, errors.Is(err, ErrNotFound), "%v", err)
		rd, err := h.store.ReleaseDetail(ctx, api.RevisionRelease(rev1))
		require.NoError(t, err)
		assert.Equal(t, 1, rd.Devices, "the release is kept, with cam-s's part")

		// Its next report, with its old token and a lower seq, is its first.
		h.clock.add(time.Minute)
		s = h.doc("cam-r", rev2, "")
		s.ReportSeq = &api.ReportSeq{Epoch: "e1", Seq: 1}
		code, body := h.posted(tok, s)
		require.Equal(t, http.StatusOK, code, body)
		assert.JSONEq(t, `{"result": "accepted"}`, body)
		var dd DeviceDetail
		h.getJSON("/v1/devices/cam-r", &dd)
		assert.Equal(t, rev2, dd.Device.Applied)
		assert.Equal(t, h.clock.now().Format(time.RFC3339), dd.Device.FirstSeen)
		require.Len(t, dd.Events, 1)
		assert.Equal(t, EventFirstSeen, dd.Events[0].Kind)

		found, err = h.store.ResetDevice(ctx, "cam-unknown")
		require.NoError(t, err)
		assert.False(t, found, "a device the hub has no row of")
	})
}
