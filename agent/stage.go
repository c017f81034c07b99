package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/source"
)

// Stager stages releases for the agent's loop: it downloads what a
// release needs into the store in the background (see model.Driver.Stage),
// while the loop's ticks keep the applied release converged, and asks for
// a tick once the release is staged, which then activates it with nothing
// left to download. It stages one release at a time: a newer one
// supersedes it, cancelling its downloads (the blobs already whole stay in
// the store; its partial downloads the newer one does not use are removed
// before that one downloads). A failed staging is tried again by a later tick, after a
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
	// Parallel bounds the models and images downloaded at once (each
	// model's blobs are bounded by models.parallel besides); 0 means 1.
	Parallel int
	Logger   *slog.Logger

	staged atomic.Int64 // bytes downloaded by every staging

	mu   sync.Mutex
	ctx  context.Context // cancelled by Stop
	stop context.CancelFunc
	wg   sync.WaitGroup
	cur  *staging
	node *node // whose drivers cur stages through
	// src is the fleet source's own download of the target (see
	// source.Request.Stage), as the last tick saw it; nil when none.
	src *source.StagingError
}

// DefaultStageBackoff spaces the attempts of a failed staging.
var DefaultStageBackoff = backoff.Exponential{Initial: 10 * time.Second, Max: 5 * time.Minute}

// staging is one release being staged, or staged.
type staging struct {
	key       string // the release (see gating.Decision.StageKey)
	revision  string
	resources []string
	work      work
	total     int64 // bytes of models to download, as the tick that started it saw them
	startedAt time.Time
	cancel    context.CancelFunc

	done     atomic.Int64 // bytes on disk of total
	progress sync.Map     // blob digest → bytes on disk (int64)

	finished chan struct{} // closed when the attempt ends
	// superseded is the finished of the staging this one superseded,
	// whose partial downloads its first attempt removes once that one
	// ended (see model.Driver.DropPartials); nil once done or when none.
	superseded <-chan struct{}
	err        error // how it ended; read after finished
	failures   int
	failedAt   time.Time
	attempted  bool
}

// Staging is what a stager says of the release it stages.
type Staging struct {
	Revision       string
	Resources      []string // the models and services (images) it downloads, by id
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

// work is what staging a release downloads: its models not in the store
// (total bytes), and the images of its container services the engine
// does not have.
type work struct {
	models []render.Model
	images []render.Service
	total  int64
}

func (w work) empty() bool { return len(w.models) == 0 && len(w.images) == 0 }

// resources lists the ids of what w downloads.
func (w work) resources() []string {
	ids := make([]string, 0, len(w.models)+len(w.images))
	for _, m := range w.models {
		ids = append(ids, planner.ModelID(m.Name))
	}
	for _, s := range w.images {
		ids = append(ids, planner.ServiceID(s.Name))
	}
	return ids
}

// toStage is what activating d would download.
func toStage(d *render.Desired) work {
	var w work
	if d == nil {
		return w
	}
	for _, r := range d.Resources {
		switch s := d.Specs[r.ID].(type) {
		case render.Model:
			if _, err := v1.NewHash(s.Digest); err != nil || s.Held != nil || s.Download <= 0 {
				continue
			}
			w.models = append(w.models, s)
			w.total += s.Download
		case render.Service:
			if s.ImagePull && r.Held == "" && len(s.Replicas) > 0 {
				w.images = append(w.images, s)
			}
		}
	}
	return w
}

// Stage makes sure the release key (revision, which needs w) is staging
// through the node's drivers, superseding any other, and says how it
// goes. An attempt that failed is started again once its backoff is over;
// one that ended well while w is not empty (its blobs were lost) is
// started again at once.
func (s *Stager) Stage(n *node, key, revision string, w work) Staging {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		s.ctx, s.stop = context.WithCancel(context.Background())
	}
	cur := s.cur
	var superseded <-chan struct{}
	if cur != nil && cur.key != key {
		s.logger().Info("staging superseded by a newer release", keyRevision, cur.revision, "by", revision)
		superseded = cur.finished
		if superseded == nil {
			superseded = closed
		}
		s.drop()
		cur = nil
	}
	if cur == nil {
		cur = &staging{key: key, revision: revision, startedAt: s.now(), total: w.total, superseded: superseded}
		s.cur, s.node = cur, n
	}
	if !cur.running() {
		cur.work, cur.resources = w, w.resources()
	}
	if !cur.running() && (!cur.attempted || cur.err == nil || !s.now().Before(cur.failedAt.Add(s.backoff().Delay(cur.failures)))) {
		s.start(cur, n)
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
func (s *Stager) start(cur *staging, n *node) {
	ctx, cancel := context.WithCancel(s.ctx)
	cur.cancel, cur.finished, cur.attempted = cancel, make(chan struct{}), true
	w := cur.work
	s.logger().Info("staging release", keyRevision, cur.revision, keyResources, strings.Join(cur.resources, ","), "bytes", cur.total)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		err := s.run(ctx, n, cur, w)
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

// closed is a channel that is closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// run downloads w: its models and images, Parallel at a time. The first
// attempt of a staging that superseded another first waits for that
// one's downloads to end and removes their partial files that w does not
// use.
func (s *Stager) run(ctx context.Context, n *node, cur *staging, w work) error {
	s.mu.Lock()
	superseded := cur.superseded
	cur.superseded = nil
	s.mu.Unlock()
	if superseded != nil {
		select {
		case <-superseded:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := n.models.DropPartials(ctx, w.models); err != nil {
			s.logger().Warn("partial downloads of a superseded release kept for now", keyRevision, cur.revision, keyError, err.Error())
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(s.Parallel, 1))
	for _, m := range w.models {
		g.Go(func() error {
			got, err := n.models.Stage(gctx, m, stageProgress{cur})
			s.staged.Add(got)
			return err
		})
	}
	for _, svc := range w.images {
		g.Go(func() error { return n.services.Stage(gctx, svc) })
	}
	return g.Wait()
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
	if s.node != nil {
		s.node.models.Unstage()
	}
	s.cur, s.node = nil, nil
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
		if s.src != nil {
			return s.sourceStatus(), true
		}
		return Staging{}, false
	}
	return s.status(s.cur), true
}

// ready calls Ready, for the fleet source's background download.
func (s *Stager) ready() {
	if s.Ready != nil {
		s.Ready()
	}
}

// source records how the fleet source's download of the target goes (nil:
// it has none), and says so as a Staging.
func (s *Stager) source(e *source.StagingError) Staging {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.src = e
	if e == nil {
		return Staging{}
	}
	return s.sourceStatus()
}

// sourceStatus is src as a Staging. The caller holds s.mu.
func (s *Stager) sourceStatus() Staging {
	st := Staging{Revision: s.src.Revision.String(), Resources: []string{ResourceSource}, Bytes: s.src.Bytes, TotalBytes: s.src.TotalBytes}
	if s.src.Err != nil {
		st.Err = s.src.Err.Error()
	}
	return st
}

// ResourceSource names the fleet source in Staging.Resources, when its
// artifact is what downloads.
const ResourceSource = "source"

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
func (s *Stager) Downloaded() int64 { return s.staged.Load() }

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
