package container

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

// orphansTimeout bounds Orphans' list call (Orphans has no context).
const orphansTimeout = 30 * time.Second

// Orphans returns the containers started for in, under its invocation,
// when tend died before it recorded them: the record that said it was
// starting names the invocation, and the container carries it as its
// dev.tend.invocation label. since is not needed: the invocation alone
// names the start. A record without an invocation finds none.
func (r *Runtime) Orphans(ctx context.Context, in service.Instance, since time.Time) ([]service.Handle, error) {
	if in.Invocation == "" {
		return nil, nil
	}
	ci, err := instance(in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, orphansTimeout)
	defer cancel()
	filters := make(client.Filters).Add("label", LabelInvocation+"="+in.Invocation)
	if d := ci.Labels[LabelDevice]; d != "" {
		filters = filters.Add("label", LabelDevice+"="+d)
	}
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, r.engineError(fmt.Errorf("list the containers of invocation %s: %w", in.Invocation, err))
	}
	out := make([]service.Handle, 0, len(res.Items))
	for _, c := range res.Items {
		out = append(out, handle{Proc{Container: c.ID}, r})
	}
	return out, nil
}
