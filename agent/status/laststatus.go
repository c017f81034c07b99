package status

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// maxStatusBytes bounds what is read of the status file.
const maxStatusBytes = 16 << 20

// WriteLast records s in stateDir, atomically, so `tend status` can
// answer when no agent does. It is a report, written after every one-shot
// apply: the file is synced before it is renamed into place, and the
// folder is not synced after (a power cut may leave the status before it,
// which the next apply or tick replaces).
func WriteLast(stateDir string, s Status) error {
	return atomicfile.WriteJSONNoDirSync(stateDir, statedir.StatusFile, s, 0o644)
}

// statusRefresh is how old the status file may grow while nothing but its
// times changed.
const statusRefresh = 15 * time.Minute

// LastWriter writes the status file when the status changed in more than
// its times, or every statusRefresh: a no-op tick every 30 s does not
// rewrite (and fsync) a file on flash storage. The zero value is ready to
// use.
type LastWriter struct {
	key     string
	written time.Time
}

// Write records s, the status of c's agent at now, unless the file holds
// the same content and is recent; a failure is logged, not returned.
func (w *LastWriter) Write(log *slog.Logger, c *manifest.AgentConfig, s Status, now time.Time) {
	k := s
	k.LastReconcile, k.LastSuccess = "", ""
	b, err := json.Marshal(k)
	key := string(b)
	if err == nil && key == w.key && now.Sub(w.written) < statusRefresh {
		return
	}
	if err := WriteLast(c.StateDir, s); err != nil {
		log.Warn("last status not written to stateDir; tend status needs a running agent", keyDevice, c.Device, keyError, err.Error())
		return
	}
	w.key, w.written = key, now
}

// ReadLast returns the status document an agent last wrote in
// stateDir, as written, and when it was written. A stateDir without one
// is an error that wraps fs.ErrNotExist.
func ReadLast(stateDir string) ([]byte, time.Time, error) {
	f, err := os.Open(statedir.Dir(stateDir).Status())
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
