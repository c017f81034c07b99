// Package fleetsim holds the fleet simulation (make fleet-sim): N agents
// in one process against a real fleet source (the git http-backend with
// path targeting or per-device branches, or an OCI artifact on Debian's
// docker-registry), each with and without MQTT notify, measuring what each
// poll costs the server and how long a commit takes to reach the fleet.
// It is a benchmark only; the package has no other code.
package fleetsim
