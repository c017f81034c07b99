package status

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
)

// newEpoch returns a new random reportSeq epoch: 16 bytes, in hex.
func newEpoch() string {
	b := make([]byte, 16)
	rand.Read(b) //nolint:errcheck // never fails; crashes the program instead
	return hex.EncodeToString(b)
}

// nextSeq takes the reportSeq of a new post: the stateDir's epoch (made
// once, when report.json holds none: a new stateDir, or one a tend
// before reportSeq wrote) and the seq after the last one taken. It is
// written to report.json before the post goes out, so that no crash
// makes the same seq go out again with other content: a collector takes
// a seq once per epoch.
//
// When report.json cannot be written (a full disk), the report still
// goes out, under an epoch kept in memory only, made anew whenever the
// epoch report.json holds would otherwise be used past its seq on disk:
// a restart then goes on from the seq on disk, and the collector starts
// afresh at each change of epoch rather than ignoring a report.
func (r *Reporter) nextSeq() ReportSeq {
	if r.last.Epoch == "" {
		r.last.Epoch, r.last.Seq = newEpoch(), 0
	}
	r.last.Seq++
	if err := writeReportCache(r.stateDir, r.last); err != nil {
		level := slog.LevelDebug // warned already
		if r.last.Epoch == r.onDisk {
			r.last.Epoch, r.last.Seq = newEpoch(), 1
			level = slog.LevelWarn
		}
		if !r.seqUnkept {
			level = slog.LevelWarn
		}
		r.seqUnkept = true
		r.log.Log(context.Background(), level, "cannot keep the report's sequence number; reports go out under an epoch kept in memory, which the collector takes as a new start",
			keyError, err.Error(), keyReportSeq, r.last.Seq)
	} else {
		r.onDisk, r.seqUnkept = r.last.Epoch, false
	}
	return ReportSeq{Epoch: r.last.Epoch, Seq: r.last.Seq}
}
