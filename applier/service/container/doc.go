// Package container runs service instances as containers through the
// Docker Engine API (Docker, or Podman's compatible socket): a
// service.Runtime beside the process runtime, so the service driver's
// replicas, restart policies, resources, health probes and rollback work
// for an `image:` service as for a `command:` one (DESIGN.md "Services as
// containers").
//
// The client is github.com/moby/moby/client, which negotiates the API
// version with the engine on its first call: down to 1.41 for Debian's
// docker.io 20.10 (its floor is 1.40), so older engines and Podman keep
// working.
//
// Restart policy is tend's, not the engine's: every container is created
// with restart policy "no", and the supervisor restarts it when Wait
// returns. Every container carries labels (dev.tend.device,
// dev.tend.resource, dev.tend.spec from Instance.Labels, dev.tend.replica
// from the runtime) by which List finds tend's containers, and only
// them, for adoption and pruning.
package container
