package container

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

var _ service.LimitKeeper = (*Runtime)(nil)

// LimitDrift compares the limits the engine holds for h's container
// (HostConfig: memory, memory and swap, CPUs, a CPU quota tend never
// sets, the restart policy, which tend keeps at "no"; not a pids limit,
// which services do not declare and engines set by default: Podman's is
// 2048)
// with in's spec. A container the engine has reported no update of since
// it was last found as declared is not asked about again: an agent's
// no-op tick makes no engine call (see updateWatch).
func (r *Runtime) LimitDrift(ctx context.Context, in service.Instance, h service.Handle) []string {
	s, ok := in.Spec.(Spec)
	hd, isContainer := h.(handle)
	if !ok || !isContainer || hd.p.Container == "" {
		return nil
	}
	id := hd.p.Container
	r.updates.watch(r.cli)
	key := fmt.Sprintf("%s %d %d", id, s.Memory, s.CPUMilli) // found as declared: as this spec declares
	if r.updates.clean(id, key) {
		return nil
	}
	since := time.Now()
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || res.Container.HostConfig == nil {
		return nil // Alive and Wait say what became of it
	}
	drift := limitDrift(s, res.Container.HostConfig)
	if len(drift) == 0 {
		r.updates.markClean(key, since)
	}
	return drift
}

// limitDrift lists how host differs from what Start asked of the engine
// for s, each phrase saying how RestoreLimits puts it right.
func limitDrift(s Spec, host *container.HostConfig) []string {
	var out []string
	add := func(what, onEngine, declared, fix string) {
		out = append(out, fmt.Sprintf("%s %s on engine, %s declared (%s)", what, onEngine, declared, fix))
	}
	fix := func(declared int64) string {
		if declared == 0 {
			return "container recreated: the engine cannot remove a limit in place"
		}
		return "updated in place"
	}
	swap := int64(0)
	if s.Memory > 0 {
		swap = s.Memory
	}
	switch {
	case host.Memory != s.Memory:
		add("memory limit", showBytes(host.Memory), showBytes(s.Memory), fix(s.Memory))
	case host.MemorySwap != swap && !(swap == 0 && host.MemorySwap <= 0):
		add("memory and swap limit", showBytes(host.MemorySwap), showBytes(swap), fix(swap))
	}
	if host.NanoCPUs != s.CPUMilli*1_000_000 {
		add("cpu limit", showNano(host.NanoCPUs), showNano(s.CPUMilli*1_000_000), fix(s.CPUMilli))
	}
	if host.CPUQuota > 0 {
		add("cpu quota", strconv.FormatInt(host.CPUQuota, 10)+"µs", "none", fix(0))
	}
	if p := host.RestartPolicy.Name; p != "" && p != container.RestartPolicyDisabled {
		out = append(out, fmt.Sprintf("restart policy %s on engine, no declared: tend restarts it (updated in place)", p))
	}
	return out
}

// RestoreLimits puts in's declared limits back on h's container with the
// engine's update call. A limit the engine holds where none is declared
// cannot be removed that way: RestoreLimits then fails, and the replica
// is started again in a new container.
func (r *Runtime) RestoreLimits(ctx context.Context, in service.Instance, h service.Handle) error {
	s, ok := in.Spec.(Spec)
	hd, isContainer := h.(handle)
	if !ok || !isContainer || hd.p.Container == "" {
		return fmt.Errorf("%s replica %d: not a container", in.Service, in.Replica)
	}
	id := hd.p.Container
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return r.engineError(err)
	}
	host := res.Container.HostConfig
	if host == nil {
		return fmt.Errorf("container %s: the engine gives no host config", id)
	}
	if (s.Memory == 0 && host.Memory != 0) || (s.CPUMilli == 0 && host.NanoCPUs != 0) || host.CPUQuota > 0 {
		return fmt.Errorf("container %s: a limit set on the engine where none is declared cannot be removed in place", id)
	}
	res2 := &container.Resources{Memory: s.Memory, MemorySwap: s.Memory, NanoCPUs: s.CPUMilli * 1_000_000}
	opts := client.ContainerUpdateOptions{Resources: res2, RestartPolicy: &container.RestartPolicy{Name: container.RestartPolicyDisabled}}
	if _, err := r.cli.ContainerUpdate(ctx, id, opts); err != nil {
		return fmt.Errorf("update container %s: %w", id, r.engineError(err))
	}
	return nil
}

// showBytes prints a memory limit as the manifest does; 0 (and the
// engine's -1 for swap) is none.
func showBytes(n int64) string {
	if n <= 0 {
		return "none"
	}
	return service.FormatBytes(n)
}

// showNano prints a CPU limit in nano CPUs as millicores, 0 as none.
func showNano(n int64) string {
	if n <= 0 {
		return "none"
	}
	return strconv.FormatInt(n/1_000_000, 10) + "m"
}

// updateWatch follows the engine's "update" events of containers, so that
// a container found as declared is asked about again only once the engine
// says it was updated (docker update). The stream starts from the time the
// watch began (the engine replays what happened since), so an update
// between a check and the stream's start is not lost; while no stream
// runs (not yet, or it broke), every check asks the engine.
type updateWatch struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	// checked holds when a container was last found as declared, by its
	// id and the limits declared.
	checked map[string]time.Time
	// updated holds, by container id, the time of its last update event.
	updated map[string]time.Time
}

// watch starts the event stream if none runs.
func (w *updateWatch) watch(cli *client.Client) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return
	}
	w.running = true
	w.checked = map[string]time.Time{}
	if w.updated == nil {
		w.updated = map[string]time.Time{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	since := time.Now()
	ev := cli.Events(ctx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Unix(), 10),
		Filters: make(client.Filters).Add("type", "container").Add("event", "update"),
	})
	go func() {
		for {
			select {
			case m := <-ev.Messages:
				at := time.Unix(0, m.TimeNano)
				w.mu.Lock()
				if at.After(w.updated[m.Actor.ID]) {
					w.updated[m.Actor.ID] = at
				}
				w.mu.Unlock()
			case <-ev.Err:
				w.mu.Lock()
				w.running = false
				w.checked = nil
				w.mu.Unlock()
				return
			}
		}
	}()
}

// clean reports whether container id was found as declared (key: the
// id and the limits declared) after its last update.
func (w *updateWatch) clean(id, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.checked[key]
	return w.running && ok && !w.updated[id].After(at)
}

// markClean records that a container was found as declared (key, as
// clean's) by a check that began at since: an update after since makes
// it unclean again.
func (w *updateWatch) markClean(key string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return
	}
	if len(w.checked) >= maxChecked {
		// Containers long gone: forget them all, at the cost of one
		// inspect of each that runs.
		w.checked = map[string]time.Time{}
		w.updated = map[string]time.Time{}
	}
	w.checked[key] = since
}

// maxChecked bounds what updateWatch remembers: an agent replaces
// containers for months.
const maxChecked = 1024

// stop ends the stream.
func (w *updateWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
	w.running = false
}
