package transport

import (
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Progress hears how blob downloads move (Options.Progress). The store's
// Fetch calls it as bytes reach the disk, and FetchAll from several
// goroutines at once, so it must be safe for that and return quickly.
type Progress interface {
	// Blob says that done of the size bytes of blob d are on disk, those
	// an earlier attempt left included. done only grows, except when a
	// registry ignores a resume and the download starts over from 0; it
	// is size once the blob is whole.
	Blob(d v1.Hash, done, size int64)
}

// Meter shows pulls as a whole, one line per model: tend's CLI draws one
// on a terminal. A Tally calls it one call at a time.
type Meter interface {
	// Pull says that done of the total bytes the pull called name
	// downloads are on disk.
	Pull(name string, done, total int64)
	// PullDone says the pull called name ended, whole or not.
	PullDone(name string)
}

// Tally adds up the progress of the blobs of one pull and tells a Meter
// the pull's totals. It is the Progress the store's FetchAll is handed
// for a model.
type Tally struct {
	name  string
	meter Meter

	mu    sync.Mutex
	blobs map[v1.Hash]int64 // bytes done of each blob
	done  int64
	total int64
}

var _ Progress = (*Tally)(nil)

// NewTally returns the tally of a pull called name of the blobs descs
// (each counted once), reported to m.
func NewTally(name string, descs []v1.Descriptor, m Meter) *Tally {
	t := &Tally{name: name, meter: m, blobs: make(map[v1.Hash]int64, len(descs))}
	for _, d := range descs {
		if _, ok := t.blobs[d.Digest]; !ok {
			t.blobs[d.Digest] = 0
			t.total += d.Size
		}
	}
	return t
}

// Blob implements Progress.
func (t *Tally) Blob(d v1.Hash, done, _ int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	before, ok := t.blobs[d]
	if !ok {
		return // not a blob of this pull
	}
	t.blobs[d] = done
	t.done += done - before
	t.meter.Pull(t.name, t.done, t.total)
}

// Totals returns the bytes on disk so far and the bytes of the pull.
func (t *Tally) Totals() (done, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done, t.total
}

// Done tells the meter the pull ended.
func (t *Tally) Done() { t.meter.PullDone(t.name) }
