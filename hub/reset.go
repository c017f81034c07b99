package hub

import (
	"context"
	"database/sql"
	"fmt"
)

// ResetDevice forgets device: its row (its last report and reportSeq),
// its events, and its part in each release and each part of one, with
// the resources it declared, all in one transaction; its next report is
// taken as its first, whatever its reportSeq or lastReconcile. Its
// tokens are kept, and stay valid. It reports false, changing nothing,
// for a device the hub has no row of.
func (s *Store) ResetDevice(ctx context.Context, device string) (bool, error) {
	found := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		// The row first: on PostgreSQL, a report of the device in flight
		// holds it, and the reset waits for that report's end.
		r, err := tx.ExecContext(ctx, `DELETE FROM devices WHERE name = $1`, device)
		if err != nil {
			return fmt.Errorf("%s: reset device %s: %w", s.display, device, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("%s: reset device %s: %w", s.display, device, err)
		}
		if found = n > 0; !found {
			return nil
		}
		for _, table := range []string{"events", "device_releases", "device_parts", "device_resources"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE device = $1`, device); err != nil {
				return fmt.Errorf("%s: reset device %s: %s: %w", s.display, device, table, err)
			}
		}
		return nil
	})
	return found, err
}
