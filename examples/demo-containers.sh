#!/usr/bin/env bash
# A service as a container, on one machine, offline: a private Docker
# Engine (Debian's dockerd, its own socket and folders under /tmp), a local
# registry with the detector model and examples/hello-container pushed FROM
# scratch as an image, the fleet in examples/containers, and the agent for
# demo-c1 in a sandbox folder. The container's main process is killed and
# the agent replaces it. Needs Go, git, docker.io and root (for dockerd).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
tend=${TEND:-$top/bin/tend}
sandbox=${DEMO_DIR:-$top/.demo-containers}
port=8097 # the service's, in examples/containers

# shellcheck source=examples/demo-lib.sh
. "$here/demo-lib.sh"
http_get() { # http_get PATH: the body of GET http://127.0.0.1:$port/PATH, curl or bash's /dev/tcp
	if command -v curl >/dev/null; then
		curl -fsS --max-time 5 "http://127.0.0.1:$port$1"
		return
	fi
	(
		exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3
		resp=$(cat <&3)
		[[ $resp == HTTP/1.?' 200 '* ]] || exit 1
		printf '%s\n' "${resp#*$'\r\n\r\n'}"
	)
}

# What it needs, said before anything is started.
dockerd=$(command -v dockerd || true)
[[ -z "$dockerd" && -x /usr/sbin/dockerd ]] && dockerd=/usr/sbin/dockerd # Debian's, not in every PATH
missing=()
command -v go >/dev/null || missing+=("Go (https://go.dev/dl, or golang-go)")
command -v git >/dev/null || missing+=("git (apt-get install git)")
[[ -n "$dockerd" ]] || missing+=("dockerd (apt-get install docker.io)")
if ((${#missing[@]})); then
	printf 'demo-containers needs %s\n' "${missing[@]}" >&2
	exit 1
fi
if [[ $(id -u) != 0 ]]; then
	echo "demo-containers runs a private dockerd, which needs root: run it as root (sudo make demo-containers)" >&2
	exit 1
fi
if http_get /healthz >/dev/null 2>&1; then
	echo "something already answers on 127.0.0.1:$port, the port of the demo's service: stop it first" >&2
	exit 1
fi

agent='' registry='' engine='' engine_dir=''
record="$sandbox/state/services/hello/0.json" # the container's record: its main process and container id
service_pid() { sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$record" 2>/dev/null; }
container_id() { sed -n 's/.*"container": "\([0-9a-f]*\)".*/\1/p' "$record" 2>/dev/null; }
unmount_under() { # unmount_under DIR: detach every mount point below DIR, deepest first
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
}
stop_all() { # stop what the demo started, remove its containers, stop the engine; -v says so
	local pid say=:
	[[ "${1:-}" == -v ]] && say=echo
	for pid in $agent $registry; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true # our children: reaped here
	done
	agent='' registry=''
	if [[ -n "$engine" ]]; then
		local ids
		if command -v docker >/dev/null; then # the containers tend made, by its label
			ids=$(docker -H "unix://$engine_dir/d.sock" ps -aq --filter label=dev.tend.device=demo-c1 2>/dev/null || true)
			if [[ -n "$ids" ]]; then
				$say "  docker rm -f" $ids
				docker -H "unix://$engine_dir/d.sock" rm -f $ids >/dev/null 2>&1 || true
			fi
		fi
		$say "  dockerd stopped (SIGTERM to pid $engine)"
		# SIGTERM: dockerd stops the containers left and its containerd;
		# its data root, removed below, holds them and the images.
		kill -TERM "$engine" 2>/dev/null || true
		if ! wait_for 60 gone "$engine"; then
			kill -KILL "$engine" 2>/dev/null || true
		fi
		wait "$engine" 2>/dev/null || true
		engine=''
	fi
	if [[ -n "$engine_dir" ]]; then
		unmount_under "$engine_dir"
		rm -rf "$engine_dir"
		$say "  $engine_dir removed"
		engine_dir=''
	fi
}
trap 'stop_all || true' EXIT
trap 'exit 130' INT TERM # through the EXIT trap

rm -rf "$sandbox"
mkdir -p "$sandbox/root"

# Short paths under /tmp: a unix socket's path (and containerd's, under the
# exec root) must fit in 108 bytes.
engine_dir=$(mktemp -d /tmp/tend-demo-XXXXXX)
sock="unix://$engine_dir/d.sock"
say "a private Docker Engine: $dockerd on $sock (log in $sandbox/dockerd.log)"
echo '{}' >"$engine_dir/daemon.json" # not /etc/docker/daemon.json
"$dockerd" --config-file "$engine_dir/daemon.json" --data-root "$engine_dir/d" --exec-root "$engine_dir/x" \
	--host "$sock" --pidfile "$engine_dir/dockerd.pid" \
	--iptables=false --ip6tables=false --bridge=none >"$sandbox/dockerd.log" 2>&1 &
engine=$!
engine_up() {
	if gone "$engine"; then
		echo "dockerd exited at start; the end of $sandbox/dockerd.log:" >&2
		tail -20 "$sandbox/dockerd.log" >&2
		exit 1
	fi
	grep -q 'API listen on' "$sandbox/dockerd.log"
}
wait_for 60 engine_up
sed -n 's/.*msg="Docker daemon".*graphdriver(s)=\([^ ]*\).*version=\([^ ]*\).*/  dockerd \2, storage driver \1/p' "$sandbox/dockerd.log" | head -1

say "registry: examples/models and examples/hello-container (FROM scratch, as apps/hello:v1) pushed to a local registry"
go build -o "$sandbox/bin/registry" "$top/examples/registry"
"$sandbox/bin/registry" -models "$here/models" -program "$here/hello-container" -image apps/hello:v1 \
	-ready "$sandbox/registry" >"$sandbox/registry.log" 2>&1 &
registry=$!
registry_up() {
	if gone "$registry"; then
		echo "the registry exited at start:" >&2
		cat "$sandbox/registry.log" >&2
		exit 1
	fi
	test -s "$sandbox/registry"
}
wait_for 120 registry_up
sed 's/^/  /' "$sandbox/registry.log"
host=$(cat "$sandbox/registry")

say "fleet repo: $sandbox/fleet (from examples/containers, registry.local:5000 → $host)"
cp -R "$here/containers" "$sandbox/fleet"
grep -rl 'registry.local:5000' "$sandbox/fleet" | xargs sed -i.orig "s|registry.local:5000|$host|g"
find "$sandbox/fleet" -name '*.orig' -delete
git -C "$sandbox/fleet" init -q -b main
git -C "$sandbox/fleet" add -A
git -C "$sandbox/fleet" -c user.name=demo -c user.email=demo@example.com -c commit.gpgsign=false commit -q -m "container fleet"
sed -n '/^  services:/,$p' "$sandbox/fleet/devices/demo-c1/device.yaml" | grep -v '^ *#' | sed 's/^/  /'

cat >"$sandbox/agent.yaml" <<EOF
apiVersion: tend.dev/v1alpha1
kind: AgentConfig
device: demo-c1
source: {paths: ["devices/{device}"]}
allowPaths: [/etc/infer, /opt/models]
runtime: {docker: {host: "$sock"}}
EOF
echo "  agent config $sandbox/agent.yaml:"
sed 's/^/    /' "$sandbox/agent.yaml"

flags=(--config "$sandbox/agent.yaml" --repo "$sandbox/fleet" --root "$sandbox/root"
	--state-dir "$sandbox/state" --schedule "@every 2s" --jitter 0s --log-format text --listen 127.0.0.1:0
	--insecure-registry "$host")

say "tend validate examples/containers"
"$tend" validate "$sandbox/fleet"

say "tend plan (device demo-c1, nothing applied yet: the tag resolves to a digest)"
"$tend" plan "${flags[@]}"

say "tend agent (schedule @every 2s), log in $sandbox/agent.log"
"$tend" agent "${flags[@]}" --log-level debug >"$sandbox/agent.log" 2>&1 &
agent=$!
wait_for 120 grep -q 'msg=reconciled' "$sandbox/agent.log"
grep -E 'msg="?(applied|reconciled|model|service started)' "$sandbox/agent.log" | sed 's/^/  /'
wait_for 30 test -f "$record"
echo "  container $(container_id | cut -c1-12), main process pid $(service_pid) on the host"

say "GET http://127.0.0.1:$port/ (the greeting and the model, mounted by tend)"
wait_for 30 http_get /healthz >/dev/null
http_get / | sed 's/^/  /'

say "tend logs service/hello (the container's output, through the engine)"
"$tend" logs service/hello "${flags[@]}" | sed 's/^/  /'

addr=$(sed -n 's/.*msg="status server listening" listen=\([^ ]*\).*/\1/p' "$sandbox/agent.log" | head -1)
say "tend status (the CONTAINER column)"
"$tend" status --listen "$addr" | sed 's/^/  /'

say "the container's main process is killed (SIGKILL): the agent replaces the container at once"
old_pid=$(service_pid) old_container=$(container_id)
echo "  kill -KILL $old_pid  # container $(cut -c1-12 <<<"$old_container")"
kill -KILL "$old_pid"
replaced() {
	local p c
	p=$(service_pid) c=$(container_id)
	[[ -n "$p" && "$p" != "$old_pid" && -n "$c" && "$c" != "$old_container" ]] && kill -0 "$p" 2>/dev/null
}
wait_for 30 replaced
wait_for 30 grep -q 'service restarted' "$sandbox/agent.log"
grep -E 'service (exited|started|restarted)' "$sandbox/agent.log" | tail -2 | sed 's/^/  /'
echo "  container $(container_id | cut -c1-12), main process pid $(service_pid)"
wait_for 30 http_get /healthz >/dev/null
echo "  GET /healthz: $(http_get /healthz)"

if command -v docker >/dev/null; then
	say "docker -H $sock ps"
	docker -H "$sock" ps --format 'table {{.ID}}\t{{.Image}}\t{{.Status}}\t{{.Names}}' | sed 's/^/  /'
fi

say "the agent is stopped: the container keeps running"
kill -TERM "$agent"
wait "$agent" || true
agent=''
pid=$(service_pid)
kill -0 "$pid"
echo "  pid $pid still runs; GET /healthz: $(http_get /healthz)"

say "tend plan --detailed-exitcode (converged: exit 0)"
"$tend" plan "${flags[@]}" --detailed-exitcode

say "cleanup: the containers removed, dockerd stopped, its folders removed"
stop_all -v
trap - EXIT INT TERM
if ! gone "$pid"; then
	echo "the container's process $pid outlived its engine" >&2
	exit 1
fi
echo "  pid $pid gone"
echo
echo "demo complete: sandbox left in $sandbox"
