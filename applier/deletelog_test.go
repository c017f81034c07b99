package applier_test

import (
	"bufio"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A delete is logged at info, naming the resource: what a tick removed
// (a resource only another ref declared, applied by hand) is in the
// agent's log, not only its count. Other actions stay at debug.
func TestApplyLogsDeletesAtInfo(t *testing.T) {
	n := newNode(t)
	n.reconcile(t, device(config, labels), "rev1")
	n.Logs.Reset()
	n.reconcile(t, device(config), "rev2")
	var info []map[string]any
	sc := bufio.NewScanner(n.Logs)
	for sc.Scan() {
		var e map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		if e["level"] != "DEBUG" {
			info = append(info, e)
		}
	}
	require.Len(t, info, 1, "%v", info)
	require.Equal(t, "INFO", info[0]["level"])
	require.Equal(t, "deleted", info[0]["msg"])
	require.Equal(t, "file/etc/infer/labels.txt", info[0]["resource"])
	require.Equal(t, "no longer declared", info[0]["reason"])
}
