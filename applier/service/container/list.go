package container

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Container is one of tend's containers as the engine lists it.
type Container struct {
	ID      string
	Name    string // without the engine's leading "/"
	Image   string // as created: image@digest
	ImageID string // sha256:… of the image's config
	State   string // created, running, exited, …
	Labels  map[string]string
}

// List returns the containers, running or not, that carry tend's labels
// for device (dev.tend.device=device and a dev.tend.replica): those tend
// may adopt or prune, and no other. One list call.
func (r *Runtime) List(ctx context.Context, device string) ([]Container, error) {
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelDevice+"="+device, LabelReplica),
	})
	if err != nil {
		return nil, r.engineError(fmt.Errorf("list containers: %w", err))
	}
	out := make([]Container, 0, len(res.Items))
	for _, c := range res.Items {
		var n string
		if len(c.Names) > 0 {
			n = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Container{ID: c.ID, Name: n, Image: c.Image, ImageID: c.ImageID, State: string(c.State), Labels: c.Labels})
	}
	return out, nil
}

// Logs writes what the container printed, stdout and stderr interleaved as
// the engine stored them, to w: the last tail lines (all when tail <= 0),
// then, with follow, what it prints until it stops or ctx ends.
func (r *Runtime) Logs(ctx context.Context, w io.Writer, id string, tail int, follow bool) error {
	return r.logs(ctx, w, id, tail, time.Time{}, time.Time{}, follow)
}

// LogsBetween writes what the container printed from since until until,
// by the engine's clock (a zero time: no bound), to w, as Logs does.
func (r *Runtime) LogsBetween(ctx context.Context, w io.Writer, id string, since, until time.Time, follow bool) error {
	return r.logs(ctx, w, id, 0, since, until, follow)
}

func (r *Runtime) logs(ctx context.Context, w io.Writer, id string, tail int, since, until time.Time, follow bool) error {
	t := "all"
	if tail > 0 {
		t = strconv.Itoa(tail)
	}
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: t, Follow: follow}
	if !since.IsZero() {
		opts.Since = unixNano(since)
	}
	if !until.IsZero() {
		opts.Until = unixNano(until)
	}
	rc, err := r.cli.ContainerLogs(ctx, id, opts)
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("logs of container %s: no such container on %s: %w", short(id), r.host, err)
		}
		return r.engineError(fmt.Errorf("logs of container %s: %w", short(id), err))
	}
	defer rc.Close()
	// The stream is multiplexed: the runtime never allocates a TTY.
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of container %s: %w", short(id), err)
	}
	return nil
}

// unixNano is t as the engine's logs API takes a time: seconds.nanoseconds.
func unixNano(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}
