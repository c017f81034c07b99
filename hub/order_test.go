package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

// seqDoc is a status document of device with reportSeq {epoch, seq}, its
// lastReconcile at seq seconds after t0 and its applied revision naming
// seq, so a stored document says which report it is.
func seqDoc(device, epoch string, seq uint64, t0 time.Time) api.Status {
	return api.Status{
		FormatVersion: api.FormatVersion, Device: device,
		AppliedRevision: fmt.Sprintf("main@sha1:%040d", seq),
		LastReconcile:   t0.Add(time.Duration(seq) * time.Second).Format(time.RFC3339Nano), Result: api.ResultNoop,
		Resources: []api.ResourceStatus{{ID: "file:/etc/a", State: api.ResourceOK}},
		ReportSeq: &api.ReportSeq{Epoch: epoch, Seq: seq},
	}
}

// storedSeq is the reportSeq of the status document the hub holds for
// device, and the number of its first seen events.
func storedSeq(t *testing.T, s *Store, device string) (api.ReportSeq, int) {
	t.Helper()
	dd, err := s.Device(context.Background(), device, maxEvents)
	require.NoError(t, err)
	var st api.Status
	require.NoError(t, json.Unmarshal(dd.Status, &st))
	require.NotNil(t, st.ReportSeq, "%s", dd.Status)
	first := 0
	for _, e := range dd.Events {
		if e.Kind == EventFirstSeen {
			first++
		}
	}
	return *st.ReportSeq, first
}

// The first reports of new devices posted at once to two hub replicas
// (two Stores on one database): however their transactions interleave,
// each device ends with its highest report, seen first once. On
// PostgreSQL, SELECT … FOR UPDATE locks no row that does not exist yet:
// an older first report overwrote a newer one.
func TestConcurrentFirstReportsKeepTheHighest(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		replicas := make([]*Store, 2)
		for i := range replicas {
			s, err := Open(ctx, dbURL)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			replicas[i] = s
		}
		const devices, reports = 30, 8
		t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for d := range devices {
			device := fmt.Sprintf("cam-%02d", d)
			for seq := uint64(1); seq <= reports; seq++ {
				st := seqDoc(device, "e1", seq, t0)
				store := replicas[seq%2]
				wg.Go(func() {
					<-start
					res, err := store.Ingest(ctx, &st, t0.Add(time.Minute))
					if err == nil && res.result != ResultAccepted && res.result != ResultReplayed {
						err = fmt.Errorf("result %s", res.result)
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s seq %d: %w", device, seq, err))
						mu.Unlock()
					}
				})
			}
		}
		close(start)
		wg.Wait()
		require.Empty(t, errs)
		lost := 0
		for d := range devices {
			device := fmt.Sprintf("cam-%02d", d)
			seq, firstSeen := storedSeq(t, replicas[0], device)
			if seq.Seq != reports || firstSeen != 1 {
				lost++
				t.Errorf("%s: stored report seq %d (want %d), %d first seen events (want 1)", device, seq.Seq, reports, firstSeen)
			}
		}
		assert.Zero(t, lost, "devices whose stored report is not their newest")
	})
}

// posted posts s with token and returns the status code and body.
func (h *testHub) posted(token string, s api.Status) (int, string) {
	h.t.Helper()
	b, err := json.Marshal(s)
	require.NoError(h.t, err)
	return h.post(token, b)
}

// device is the hub's row of name, and the lastReconcile of the status
// document it holds.
func (h *testHub) device(name string) (Device, string) {
	h.t.Helper()
	var dd DeviceDetail
	h.getJSON("/v1/devices/"+name, &dd)
	var st api.Status
	require.NoError(h.t, json.Unmarshal(dd.Status, &st))
	return dd.Device, st.LastReconcile
}

// A device's reports are ordered by reportSeq, never by its clock: a
// clock in 2099, in 1677 or in 1970 freezes nothing; a seq not above the
// one held is replayed; a new epoch starts afresh, the device's history
// going on. Last seen is the hub's clock. The device's times are kept
// as it gave them.
func TestReportsOrderedByReportSeq(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		tok := h.token("cam-a")
		t0 := h.clock.now()
		at := func(when string, epoch string, seq uint64) api.Status {
			s := seqDoc("cam-a", epoch, seq, t0)
			s.LastReconcile = when
			return s
		}
		steps := []struct {
			name, when, epoch string
			seq               uint64
			result            string
			applied           uint64 // the seq of the report the hub holds after
		}{
			{"first", "2026-12-03T12:00:00Z", "e1", 1, ResultAccepted, 1},
			{"a clock in 2099", "2099-01-01T00:00:00Z", "e1", 2, ResultAccepted, 2},
			{"the clock set right", "2026-12-03T12:01:00Z", "e1", 3, ResultAccepted, 3},
			{"a clock before int64 nanoseconds", "1677-09-21T00:00:00Z", "e1", 4, ResultAccepted, 4},
			{"a clock in 1970", "1970-01-01T00:00:42Z", "e1", 5, ResultAccepted, 5},
			{"before the first tick", "", "e1", 6, ResultAccepted, 6},
			{"the same seq again", "2026-12-03T12:05:00Z", "e1", 6, ResultReplayed, 6},
			{"an older seq, newer clock", "2026-12-03T12:06:00Z", "e1", 2, ResultReplayed, 6},
			{"a new epoch starts afresh", "2026-12-03T12:00:00Z", "e2", 1, ResultAccepted, 1},
			{"and is ordered by its seq", "2026-12-03T12:07:00Z", "e2", 3, ResultAccepted, 3},
			{"a seq of 2^63 - 1", "2026-12-03T12:08:00Z", "e2", math.MaxInt64, ResultAccepted, math.MaxInt64},
		}
		var taken time.Time
		for _, c := range steps {
			h.clock.add(time.Minute)
			code, body := h.posted(tok, at(c.when, c.epoch, c.seq))
			require.Equal(t, http.StatusOK, code, "%s: %s", c.name, body)
			assert.JSONEq(t, `{"result": "`+c.result+`"}`, body, c.name)
			if c.result == ResultAccepted {
				taken = h.clock.now()
			}
			d, given := h.device("cam-a")
			assert.Equal(t, fmt.Sprintf("main@sha1:%040d", c.applied), d.Applied, c.name)
			assert.Equal(t, taken.Format(time.RFC3339), d.LastSeen, "%s: last seen is when the hub took the last report; a replayed one changes nothing", c.name)
			if c.result == ResultAccepted {
				assert.Equal(t, c.when, given, "%s: the status document keeps the device's time as it gave it", c.name)
			}
			switch c.when {
			case "1677-09-21T00:00:00Z":
				assert.Equal(t, "1677-09-21T00:12:43Z", d.LastReconcile, "clamped to what int64 nanoseconds hold, not wrapped to 2262")
			case "1970-01-01T00:00:42Z", "2099-01-01T00:00:00Z":
				assert.Equal(t, c.when, d.LastReconcile, c.name)
			}
		}
		var dd DeviceDetail
		h.getJSON("/v1/devices/cam-a", &dd)
		assert.Equal(t, t0.Add(time.Minute).Format(time.RFC3339), dd.Device.FirstSeen, "the new epoch goes on with the device's history")
		firstSeen := 0
		for _, e := range dd.Events {
			if e.Kind == EventFirstSeen {
				firstSeen++
			}
		}
		assert.Equal(t, 1, firstSeen)
		m := h.metrics()
		assert.Equal(t, 9.0, m[`tend_hub_reports_total{result="accepted"}`])
		assert.Equal(t, 2.0, m[`tend_hub_reports_total{result="replayed"}`])

		t.Run("a report without reportSeq after one with is refused", func(t *testing.T) {
			legacy := at("2030-01-01T00:00:00Z", "", 0)
			legacy.ReportSeq = nil
			code, body := h.posted(tok, legacy)
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Contains(t, body, "report of cam-a: report without reportSeq, and device cam-a sent one before")
			assert.Contains(t, body, "tend-hub device reset cam-a")
			d, _ := h.device("cam-a")
			assert.Equal(t, fmt.Sprintf("main@sha1:%040d", uint64(math.MaxInt64)), d.Applied, "nothing changed")
		})
		t.Run("malformed reportSeq", func(t *testing.T) {
			for _, c := range []struct {
				seq  api.ReportSeq
				want string
			}{
				{api.ReportSeq{Epoch: "", Seq: 1}, `reportSeq.epoch "" is not 1 to 64 letters`},
				{api.ReportSeq{Epoch: "e 1", Seq: 1}, `reportSeq.epoch "e 1" is not`},
				{api.ReportSeq{Epoch: strings.Repeat("e", 65), Seq: 1}, `is not 1 to 64 letters`},
				{api.ReportSeq{Epoch: "e3", Seq: math.MaxInt64 + 1}, "reportSeq.seq 9223372036854775808 is over 9223372036854775807"},
			} {
				s := at("2026-12-03T12:00:00Z", "", 0)
				s.ReportSeq = &c.seq
				code, body := h.posted(tok, s)
				assert.Equal(t, http.StatusBadRequest, code, body)
				assert.Contains(t, body, c.want)
			}
		})
	})
}

// A report without reportSeq (a tend before it) is ordered by its
// lastReconcile, in unix nanoseconds clamped to what an int64 holds: one
// of 1677 wrapped to 2262, and every report after it was replayed.
func TestReportsWithoutReportSeqOrderedByClock(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		tok := h.token("cam-b")
		legacy := func(when string, seq uint64) api.Status {
			s := seqDoc("cam-b", "", seq, h.clock.now())
			s.LastReconcile, s.ReportSeq = when, nil
			return s
		}
		for _, c := range []struct {
			name, when string
			seq        uint64 // names the report
			result     string
			applied    uint64
		}{
			{"a clock before int64 nanoseconds", "1677-09-21T00:00:00Z", 1, ResultAccepted, 1},
			{"the clock set right", "2026-12-03T12:00:00Z", 2, ResultAccepted, 2},
			{"older", "2026-12-03T11:00:00Z", 3, ResultReplayed, 2},
			{"the same time", "2026-12-03T12:00:00Z", 4, ResultAccepted, 4},
			{"a clock past int64 nanoseconds", "2262-04-12T00:00:00Z", 5, ResultAccepted, 5},
			{"after it, a clock set right is older", "2026-12-03T12:30:00Z", 6, ResultReplayed, 5},
			{"and the device upgraded to reportSeq starts afresh", "2026-12-03T12:31:00Z", 7, ResultAccepted, 7},
		} {
			h.clock.add(time.Minute)
			s := legacy(c.when, c.seq)
			if c.seq == 7 {
				s.ReportSeq = &api.ReportSeq{Epoch: "e1", Seq: 1}
			}
			code, body := h.posted(tok, s)
			require.Equal(t, http.StatusOK, code, "%s: %s", c.name, body)
			assert.JSONEq(t, `{"result": "`+c.result+`"}`, body, c.name)
			d, _ := h.device("cam-b")
			assert.Equal(t, fmt.Sprintf("main@sha1:%040d", c.applied), d.Applied, c.name)
			if c.seq == 5 {
				assert.Equal(t, "2262-04-11T23:47:16Z", d.LastReconcile, "clamped")
			}
		}
	})
}

// orderWhere, the condition of the device row's ON CONFLICT update, takes
// a report exactly when follows does, in both databases.
func TestOrderWhereAgreesWithFollows(t *testing.T) {
	t2026 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).UnixNano()
	claimed := reportOrder{reconciled: math.MinInt64} // lockDevice's row
	orders := []reportOrder{
		claimed,
		{reconciled: t2026 - 1}, {reconciled: t2026}, {reconciled: t2026 + 1}, {reconciled: math.MaxInt64},
		{epoch: "e1", seq: 0}, {epoch: "e1", seq: 4}, {epoch: "e1", seq: 5}, {epoch: "e1", seq: 6, reconciled: math.MinInt64},
		{epoch: "e1", seq: math.MaxInt64}, {epoch: "e2", seq: 1},
	}
	stores(t, func(t *testing.T, dbURL string) {
		s, err := Open(context.Background(), dbURL)
		require.NoError(t, err)
		defer s.Close()
		write := func(o reportOrder, compare bool) bool {
			where := ""
			if compare {
				where = orderWhere
			}
			r, err := s.db.Exec(`INSERT INTO devices (name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen, status, report_epoch, report_seq)
				VALUES ('cam-o', '{}', '', '', '', '', -1, '', $1, 0, 0, '', $2, $3)
				ON CONFLICT (name) DO UPDATE SET reconciled = excluded.reconciled, report_epoch = excluded.report_epoch, report_seq = excluded.report_seq`+where,
				o.reconciled, o.epoch, o.seq)
			require.NoError(t, err)
			n, err := r.RowsAffected()
			require.NoError(t, err)
			return n == 1
		}
		for _, stored := range orders {
			for _, next := range orders {
				write(stored, false)
				want := next.follows("cam-o", stored) == nil
				assert.Equal(t, want, write(next, true), "%+v after %+v", next, stored)
			}
		}
	})
}
