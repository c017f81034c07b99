package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Revoking a device's tokens cuts it off: its next report is refused 401,
// and another device's tokens still work.
func TestRevokeTokens(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	old, current, other := h.token("cam-1"), h.token("cam-1"), h.token("cam-2")
	h.report(old, h.doc("cam-1", rev1, ""))
	n, err := h.store.RevokeTokens(context.Background(), "cam-1")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	body, _ := json.Marshal(h.doc("cam-1", rev1, ""))
	for _, tok := range []string{old, current} {
		code, msg := h.post(tok, body)
		assert.Equal(t, http.StatusUnauthorized, code, msg)
	}
	h.report(other, h.doc("cam-2", rev1, ""))
	n, err = h.store.RevokeTokens(context.Background(), "cam-1")
	require.NoError(t, err)
	assert.Zero(t, n)
	var dd DeviceDetail
	h.getJSON("/v1/devices/cam-1", &dd)
	assert.Equal(t, "cam-1", dd.Device.Name, "what it reported stays")
}
