package hub

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/tend-dev/tend/api"
)

// A device's reports are ordered by their reportSeq, never by the
// device's clock: a report whose epoch is the one the hub holds and
// whose seq is not above the one it holds is replayed (ignored); a
// report of another epoch (a stateDir made anew: a reflashed device)
// starts afresh, and the device's history (its first sight, events and
// part in each release) goes on from the report before. A report
// without reportSeq, from a tend before it, is ordered by its
// lastReconcile as before, unless the device has sent a reportSeq: it is
// then refused, as a downgraded tend or an old report replayed.

// errNoReportSeq is a report without reportSeq from a device that sent one.
var errNoReportSeq = errors.New("report without reportSeq")

// epochRE bounds a reportSeq's epoch, which tend makes of 32 hex digits.
var epochRE = regexp.MustCompile(`^[0-9A-Za-z_-]{1,64}$`)

// reportOrder is where a report stands among its device's.
type reportOrder struct {
	epoch string // of its reportSeq; "" for a report without one
	seq   int64
	// reconciled is its lastReconcile in unix ns, clamped to what an
	// int64 holds (see unixNano); 0 for "".
	reconciled int64
}

// orderOf reads where s stands among its device's reports. Its
// lastReconcile is RFC 3339, or "" (before the device's first tick) in a
// report with a reportSeq, which needs no clock. Its errors say which
// field is wrong.
func orderOf(s *api.Status) (reportOrder, error) {
	var o reportOrder
	if s.LastReconcile != "" || s.ReportSeq == nil {
		t, err := time.Parse(time.RFC3339Nano, s.LastReconcile)
		if err != nil {
			return o, fmt.Errorf("lastReconcile %q is not an RFC 3339 time", s.LastReconcile)
		}
		o.reconciled = unixNano(t)
	}
	if rs := s.ReportSeq; rs != nil {
		if !epochRE.MatchString(rs.Epoch) {
			return o, fmt.Errorf("reportSeq.epoch %q is not 1 to 64 letters, digits, '-' or '_'", rs.Epoch)
		}
		if rs.Seq > math.MaxInt64 {
			return o, fmt.Errorf("reportSeq.seq %d is over %d", rs.Seq, int64(math.MaxInt64))
		}
		o.epoch, o.seq = rs.Epoch, int64(rs.Seq)
	}
	return o, nil
}

var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// unixNano is t in unix nanoseconds, clamped to what an int64 holds
// (1677-09-21 to 2262-04-11): t.UnixNano wraps outside, and a report of
// 1677 became one of 2262. The status document keeps t as the device
// gave it.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minUnixNano):
		return math.MinInt64
	case t.After(maxUnixNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// follows checks that a report at o comes after the one stored at prev:
// errReplayed when it does not, an error wrapping errNoReportSeq for a
// report without reportSeq when the device sent one.
func (o reportOrder) follows(device string, prev reportOrder) error {
	switch {
	case o.epoch == "" && prev.epoch != "":
		return fmt.Errorf("%w, and device %s sent one before: its tend was downgraded, or this is an old report replayed; upgrade its tend, or run tend-hub device reset %s to take reports without one",
			errNoReportSeq, device, device)
	case o.epoch == "" && o.reconciled < prev.reconciled:
		return errReplayed
	case o.epoch != "" && o.epoch == prev.epoch && o.seq <= prev.seq:
		return errReplayed
	}
	return nil
}

// orderWhere is follows in SQL, the condition of the ON CONFLICT update
// of a device's row: the database takes the report only when it comes
// after the one it holds, whatever this replica read before.
const orderWhere = ` WHERE (excluded.report_epoch <> '' AND (devices.report_epoch <> excluded.report_epoch OR devices.report_seq < excluded.report_seq))
	OR (excluded.report_epoch = '' AND devices.report_epoch = '' AND devices.reconciled <= excluded.reconciled)`

// storedDevice is what a device's row holds of its last report.
type storedDevice struct {
	raw       string // its status document
	ids       string // resource_ids
	firstSeen int64
	order     reportOrder
	// The release it worked towards, and its wave and rollout then.
	target, rollout string
	wave            int
}

// lockDevice reads device's row and holds it until tx ends, or returns
// nil for a device the hub has no row of, having claimed its name with a
// row that tx overwrites (or that goes when tx is rolled back). Two first
// reports of a device on two replicas take turns there: SELECT … FOR
// UPDATE locks no row that does not exist yet, while the second INSERT
// of a name waits for the first's transaction, then finds its row.
func (s *Store) lockDevice(ctx context.Context, tx *sql.Tx, device string, now time.Time) (*storedDevice, error) {
	lock := ""
	if s.dialect == postgres {
		lock = " FOR UPDATE"
	}
	read := func() (*storedDevice, error) {
		var d storedDevice
		err := tx.QueryRowContext(ctx, `SELECT status, resource_ids, first_seen, reconciled, report_epoch, report_seq, target_release, wave, rollout FROM devices WHERE name = $1`+lock, device).
			Scan(&d.raw, &d.ids, &d.firstSeen, &d.order.reconciled, &d.order.epoch, &d.order.seq, &d.target, &d.wave, &d.rollout)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("read device %s: %w", device, err)
		}
		return &d, nil
	}
	d, err := read()
	if d != nil || err != nil {
		return d, err
	}
	// Ordered before any report (reconciled the least there is, no epoch).
	r, err := tx.ExecContext(ctx, `INSERT INTO devices (name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen, status)
		VALUES ($1, '{}', '', '', '', '', -1, '', $2, $3, $3, '') ON CONFLICT (name) DO NOTHING`, device, int64(math.MinInt64), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("write device %s: %w", device, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return nil, fmt.Errorf("write device %s: %w", device, err)
	} else if n == 1 {
		return nil, nil
	}
	// Another transaction wrote its first report in the meantime.
	if d, err = read(); err == nil && d == nil {
		err = fmt.Errorf("read device %s: its row, there a moment ago, is gone", device)
	}
	return d, err
}
