package container

import (
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// ErrNoEngine: no container engine answers at the runtime's host. Worth
// retrying: the engine may be starting.
var ErrNoEngine = errors.New("no container engine")

// engineError names the host and says how to start an engine when err is
// a failure to reach it; other errors are returned as they are.
func (r *Runtime) engineError(err error) error {
	if err == nil || !client.IsErrConnectionFailed(err) {
		return err
	}
	return fmt.Errorf("%w at %s: start Docker (systemctl start docker) or Podman's API service (systemctl start podman.socket), or set runtime.docker.host (or DOCKER_HOST) to the engine's socket: %w", ErrNoEngine, r.host, err)
}

// isNotFound reports whether the engine answered that the object does not
// exist.
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

func isConflict(err error) bool { return cerrdefs.IsConflict(err) }
