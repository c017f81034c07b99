package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/applier/model"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Stager stages releases for the agent's loop: it downloads what a
// release needs into the store in the background (see model.Driver.Stage),
// while the loop's ticks keep the applied release converged, and asks for
// a tick once the release is staged, which then activates it with nothing
// left to download. It stages one release at a time: a newer one
// supersedes it, cancelling its downloads (the blobs already whole stay in
// the store). A failed staging is tried again by a later tick, after a
// backoff.
type Stager struct {
	// Ready is called when a release is staged or its staging failed
	// (the loop's Trigger); nil calls nothing.
	Ready func()
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Backoff spaces the attempts of a staging that fails; zero means
	// DefaultStageBackoff.
	Backoff backoff.Exponential
	Logger  *slog.Logger

	mu     sync.Mutex
	ctx    context.Context // cancelled by Stop
	stop   context.CancelFunc
	wg     sync.WaitGroup
	cur    *staging
	models *model.Driver // the driver cur stages through
	bytes  atomic.Int64  // downloaded by every staging (see Downloaded)
}

// DefaultStageBackoff spaces the attempts of a failed staging.
var DefaultStageBackoff = backoff.Exponential{Initial: 10 * time.Second, Max: 5 * time.Minute}

// staging is one release being staged, or staged.
type staging struct {
	key       string // the release (see releaseKey)
	revision  string
	resources []string
	models    []render.Model
	total     int64 // bytes to download, as the tick that started it saw them
	startedAt time.Time
	cancel    context.CancelFunc

	done     atomic.Int64 // bytes on disk of total
	progress sync.Map     // blob digest → bytes on disk (int64)

	finished  chan struct{} // closed when the attempt ends
	err       error         // how it ended; read after finished
	failures  int
	failedAt  time.Time
	attempted bool
}

// Staging is what a stager says of the release it stages.
type Staging struct {
	Revision       string
	Resources      []string // the models it downloads, by id
	Bytes          int64    // downloaded so far, partial downloads of earlier attempts included
	TotalBytes     int64
	BytesPerSecond float64 // since it started
	ETA            time.Duration
	StartedAt      time.Time
	Staged         bool   // everything is in the store
	Err            string // why the last attempt failed; "" while none did
}

func (s *Stager) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Stager) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// toStage lists the models of d that activating it would download.
func toStage(d *render.Desired) (models []render.Model, total int64) {
	if d == nil {
		return nil, 0
	}
	for _, r := range d.Resources {
		m, ok := d.Specs[r.ID].(render.Model)
		if !ok || m.Held != nil || m.Download <= 0 {
			continue
		}
		if _, err := v1.NewHash(m.Digest); err != nil {
			continue
		}
		models = append(models, m)
		total += m.Download
	}
	return models, total
}

// Stage makes sure the release key (revision, whose models need
// downloads: need, total bytes) is staging through models, superseding any
// other, and says how it goes. An attempt that failed is started again
// once its backoff is over; one that ended well while need is not empty
// (its blobs were lost) is started again at once.
func (s *Stager) Stage(models *model.Driver, key, revision string, need []render.Model, total int64) Staging {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		s.ctx, s.stop = context.WithCancel(context.Background())
	}
	cur := s.cur
	if cur != nil && cur.key != key {
		s.logger().Info("staging superseded by a newer release", keyRevision, cur.revision, "by", revision)
		s.drop()
		cur = nil
	}
	if cur == nil {
		cur = &staging{key: key, revision: revision, startedAt: s.now(), total: total}
		s.cur, s.models = cur, models
	}
	if !cur.running() {
		cur.models = need
		cur.resources = make([]string, 0, len(need))
		for _, m := range need {
			cur.resources = append(cur.resources, planner.ModelID(m.Name))
		}
	}
	if !cur.running() && (!cur.attempted || cur.err == nil || !s.now().Before(cur.failedAt.Add(s.backoff().Delay(cur.failures)))) {
		s.start(cur, models)
	}
	return s.status(cur)
}

func (s *Stager) backoff() backoff.Exponential {
	if s.Backoff == (backoff.Exponential{}) {
		return DefaultStageBackoff
	}
	return s.Backoff
}

// running reports whether an attempt is under way.
func (st *staging) running() bool {
	if st.finished == nil {
		return false
	}
	select {
	case <-st.finished:
		return false
	default:
		return true
	}
}

// start begins an attempt at cur. The caller holds s.mu.
func (s *Stager) start(cur *staging, models *model.Driver) {
	ctx, cancel := context.WithCancel(s.ctx)
	cur.cancel, cur.finished, cur.attempted = cancel, make(chan struct{}), true
	need := cur.models
	s.logger().Info("staging release", keyRevision, cur.revision, keyResources, strings.Join(cur.resources, ","), "bytes", cur.total)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		var errs []error
		for _, m := range need {
			n, err := models.Stage(ctx, m, stageProgress{cur})
			s.bytes.Add(n)
			if err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
			}
		}
		err := errors.Join(errs...)
		s.mu.Lock()
		cur.err = err
		if err != nil {
			cur.failures++
			cur.failedAt = s.now()
		} else {
			cur.failures = 0
		}
		close(cur.finished)
		superseded := s.cur != cur
		s.mu.Unlock()
		switch {
		case superseded || s.ctx.Err() != nil:
			return
		case err != nil:
			s.logger().Warn("staging failed; a later tick tries again", keyRevision, cur.revision, keyError, err.Error())
		default:
			s.logger().Info("release staged", keyRevision, cur.revision)
		}
		if s.Ready != nil {
			s.Ready()
		}
	}()
}

// drop cancels the current staging and lets its blobs go. The caller
// holds s.mu.
func (s *Stager) drop() {
	if s.cur == nil {
		return
	}
	if s.cur.cancel != nil {
		s.cur.cancel()
	}
	if s.models != nil {
		s.models.Unstage()
	}
	s.cur, s.models = nil, nil
}

// Forget says the release key needs nothing staged any more (it is
// taken: its models are declared from then on, and keep their blobs), or
// that key is the target and another release staging is superseded. The
// stager drops the staging of any release but key, cancelling it, and
// that of key once it is not running; "" drops any.
func (s *Stager) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && (s.cur.key != key || !s.cur.running()) {
		s.drop()
	}
}

// Supersede drops the staging of any release but key, cancelling it.
func (s *Stager) Supersede(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.key != key {
		s.drop()
	}
}

// Status says how the current staging goes; ok is false without one.
func (s *Stager) Status() (Staging, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return Staging{}, false
	}
	return s.status(s.cur), true
}

// status says how cur goes. The caller holds s.mu.
func (s *Stager) status(cur *staging) Staging {
	st := Staging{Revision: cur.revision, Resources: cur.resources, Bytes: min(cur.done.Load(), cur.total), TotalBytes: cur.total, StartedAt: cur.startedAt}
	if !cur.running() && cur.attempted && cur.err == nil {
		st.Staged, st.Bytes = true, cur.total
	}
	if cur.err != nil {
		st.Err = cur.err.Error()
	}
	if el := s.now().Sub(cur.startedAt).Seconds(); el > 0 && st.Bytes > 0 {
		st.BytesPerSecond = float64(st.Bytes) / el
		if left := st.TotalBytes - st.Bytes; left > 0 {
			st.ETA = time.Duration(float64(left) / st.BytesPerSecond * float64(time.Second)).Round(time.Second)
		}
	}
	return st
}

// Downloaded is the bytes the stager's stagings downloaded from
// registries since it was made, those of attempts that failed or were
// superseded included (tend_stage_bytes_total).
func (s *Stager) Downloaded() int64 { return s.bytes.Load() }

// Busy reports whether a release is staging: one is current and not all
// of its bytes are in the store yet (tend_staging). A staging whose last
// attempt failed, waiting for its next, is busy too.
func (s *Stager) Busy() bool {
	st, ok := s.Status()
	return ok && !st.Staged
}

// Stop cancels the staging under way and waits for it to end.
func (s *Stager) Stop() {
	s.mu.Lock()
	if s.stop != nil {
		s.stop()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// stageProgress adds up the bytes on disk of each blob of a staging.
type stageProgress struct{ st *staging }

func (p stageProgress) Blob(d v1.Hash, done, _ int64) {
	prev, _ := p.st.progress.Swap(d.String(), done)
	old, _ := prev.(int64)
	p.st.done.Add(done - old)
}

// document is st as the status document shows it.
func (st Staging) document() status.Staging {
	d := status.Staging{Revision: st.Revision, Resources: st.Resources, Bytes: st.Bytes, TotalBytes: st.TotalBytes,
		BytesPerSecond: int64(st.BytesPerSecond), StartedAt: status.RFC3339(st.StartedAt), Error: st.Err}
	if st.ETA > 0 {
		d.ETA = st.ETA.String()
	}
	if d.Resources == nil {
		d.Resources = []string{}
	}
	return d
}
