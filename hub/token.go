package hub

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// tokenPrefix marks a device token, so one pasted in the wrong place is
// recognisable.
const tokenPrefix = "tendd_"

// CreateToken makes a new token for device, stores its hash and returns
// it: the only time it is seen. A device may have several (rotation).
func (s *Store) CreateToken(ctx context.Context, device string, now time.Time) (string, error) {
	if err := checkDevice(device); err != nil {
		return "", err
	}
	b := make([]byte, 32)
	rand.Read(b)
	token := tokenPrefix + hex.EncodeToString(b)
	_, err := s.db.ExecContext(ctx, `INSERT INTO tokens (hash, device, created) VALUES ($1, $2, $3)`, hashToken(token), device, now.UnixNano())
	if err != nil {
		return "", fmt.Errorf("%s: store the token of %s: %w", s.display, device, err)
	}
	return token, nil
}

// TokenDevice is the device a token writes for; "" for an unknown token.
func (s *Store) TokenDevice(ctx context.Context, token string) (string, error) {
	var device string
	err := s.db.QueryRowContext(ctx, `SELECT device FROM tokens WHERE hash = $1`, hashToken(token)).Scan(&device)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: look up a token: %w", s.display, err)
	}
	return device, nil
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// RevokeTokens deletes every token of device, so that it can neither
// report nor ask a verdict, and says how many there were. What the
// device reported stays.
func (s *Store) RevokeTokens(ctx context.Context, device string) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM tokens WHERE device = $1`, device)
	if err != nil {
		return 0, fmt.Errorf("%s: revoke the tokens of %s: %w", s.display, device, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: revoke the tokens of %s: %w", s.display, device, err)
	}
	return int(n), nil
}
