package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/tend-dev/tend/internal/reserve"
)

// diskGuard keeps the agent's disk reserve (see package reserve): a tick
// that fails because the disk is full lets it go and runs again at once,
// so that drift is still reverted; the reserve is taken back once the
// filesystem has room.
type diskGuard struct {
	reserve *reserve.Reserve // nil before Start
	// full is what the status says while the disk is full: which write
	// failed and what to do; "" once the reserve is held again.
	full string
}

// apply runs apply and, when it fails on a full disk, lets the reserve go
// and runs it again.
func (g *diskGuard) apply(ctx context.Context, log *slog.Logger, apply func(context.Context) (*Result, error)) (*Result, error) {
	res, err := apply(ctx)
	path, full := reserve.Full(err)
	if !full || g.reserve == nil {
		return res, err
	}
	where := ""
	if path != "" {
		where = " " + path
	}
	released, rerr := g.reserve.Release()
	switch {
	case rerr != nil:
		g.full = fmt.Sprintf("disk full at%s, and the disk reserve could not be released (%v): free space on the filesystem of %s", where, rerr, filepath.Dir(g.reserve.Path()))
		return res, err
	case !released:
		g.full = fmt.Sprintf("disk full at%s, and the disk reserve is spent: free space on the filesystem of %s", where, filepath.Dir(g.reserve.Path()))
		return res, err
	}
	g.full = fmt.Sprintf("disk full at%s: the agent released its %d MiB reserve %s to keep reverting drift; free space on that filesystem, and it takes the reserve back",
		where, reserve.Size>>20, g.reserve.Path())
	log.Warn("disk full; released the disk reserve and ticking again", keyPath, path, keyReserve, g.reserve.Path(), keyError, err.Error())
	return apply(ctx)
}

// take takes the reserve back when it is not held and the filesystem has
// room for it; once it is held, the disk is no longer reported full.
func (g *diskGuard) take(log *slog.Logger) {
	if g.reserve == nil {
		return
	}
	held, err := g.reserve.Take()
	if err != nil {
		log.Warn("disk reserve not taken", keyReserve, g.reserve.Path(), keyError, err.Error())
		return
	}
	if held && g.full != "" {
		log.Info("disk reserve taken back", keyReserve, g.reserve.Path())
		g.full = ""
	}
}
