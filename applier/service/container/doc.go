// Package container is the runtime of `image:` services (kind
// "container", registered with package service when imported): it runs
// their instances as containers through the Docker Engine API (Docker, or
// Podman's compatible socket), so the service driver's replicas, restart
// policies, resources, health probes and rollback work for them as for a
// `command:` one (DESIGN.md "Services as containers"). Everything only
// containers need is here: pinning an image's tag to a digest at render
// time, pulling it before a plan, pruning stray containers and unused
// images after one, and reading logs from the engine.
//
// The client is github.com/moby/moby/client, which negotiates the API
// version with the engine on its first call: down to 1.41 for Debian's
// docker.io 20.10 (its floor is 1.40), so older engines and Podman keep
// working.
//
// Restart policy is tend's, not the engine's: every container is created
// with restart policy "no", and the supervisor restarts it when Wait
// returns, in place (RestartInPlace: the same container started again,
// its output kept) unless what it runs changed. Every container carries labels (dev.tend.device,
// dev.tend.resource, dev.tend.spec from Spec.Labels, dev.tend.replica
// and dev.tend.invocation from the runtime) by which List finds tend's
// containers for adoption. Pruning removes only containers the records
// name; the one exception is a replica being created again, which first
// stops the containers labelled as that very replica under another
// invocation (what an engine that died mid-start left).
package container
