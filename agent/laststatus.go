package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
)

// StatusFile in stateDir holds the status document of the agent's last
// tick, so `tend status` can answer when no agent does.
const StatusFile = "status.json"

// maxStatusBytes bounds what is read of the status file.
const maxStatusBytes = 16 << 20

// WriteLastStatus records s in stateDir, atomically.
func WriteLastStatus(stateDir string, s Status) error {
	return atomicfile.WriteJSON(stateDir, StatusFile, s, 0o644)
}

// ReadLastStatus returns the status document an agent last wrote in
// stateDir, as written, and when it was written. A stateDir without one
// is an error that wraps fs.ErrNotExist.
func ReadLastStatus(stateDir string) ([]byte, time.Time, error) {
	f, err := os.Open(filepath.Join(stateDir, StatusFile))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the last status: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the last status: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStatusBytes))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the last status: %w", err)
	}
	return data, fi.ModTime(), nil
}
