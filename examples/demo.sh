#!/usr/bin/env bash
# The whole loop on one machine, offline: a fleet repo made from
# examples/fleet (profiles and devices), the agent for demo-01 in a sandbox folder, a plan, an apply,
# a hand edit on the "device", and the edit reverted on the next tick.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
tend=${TEND:-$top/bin/tend}
sandbox=${DEMO_DIR:-$top/.demo}

# shellcheck source=examples/demo-lib.sh
. "$here/demo-lib.sh"
agent='' registry=''
record="$sandbox/state/services/infer/0.json" # the demo service's record
# The first pid in the record is its process's (a "previous" one may follow).
service_pid() { sed -n '/"pid": /{s/.*"pid": \([0-9]*\).*/\1/p;q;}' "$record" 2>/dev/null; }
stop_all() { # stop what the demo started and wait until it has exited
	local pid
	for pid in $agent $registry; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true # our children: reaped here
	done
	local service
	service=$(service_pid || true) # the agent restarts it: the record has its pid now
	if [[ -n "$service" ]]; then # started by the agent: polled until gone
		kill -TERM -- "-$service" 2>/dev/null || true
		if ! wait_for 10 gone "$service"; then
			kill -KILL -- "-$service" 2>/dev/null || true
			wait_for 10 gone "$service" || true
		fi
	fi
	agent='' registry=''
}
trap 'stop_all || true' EXIT

rm -rf "$sandbox"
mkdir -p "$sandbox/root"
say "model registry: examples/models pushed to a local registry"
go build -o "$sandbox/bin/registry" "$top/examples/registry"
"$sandbox/bin/registry" -models "$here/models" -ready "$sandbox/registry" &
registry=$!
wait_for 30 test -s "$sandbox/registry"
host=$(cat "$sandbox/registry")

say "fleet repo: $sandbox/fleet (from examples/fleet, registry.local:5000 → $host)"
cp -R "$here/fleet" "$sandbox/fleet"
grep -rl 'registry.local:5000' "$sandbox/fleet" | xargs sed -i.orig "s|registry.local:5000|$host|g"
find "$sandbox/fleet" -name '*.orig' -delete
git -C "$sandbox/fleet" init -q -b main
git -C "$sandbox/fleet" add -A
git -C "$sandbox/fleet" -c user.name=demo -c user.email=demo@example.com -c commit.gpgsign=false commit -q -m "example fleet"
find "$sandbox/fleet/profiles" "$sandbox/fleet/devices" -type f | sed "s|$sandbox/fleet/|  |" | sort

flags=(--config "$here/agent.yaml" --repo "$sandbox/fleet" --root "$sandbox/root"
	--state-dir "$sandbox/state" --schedule "@every 2s" --jitter 0s --log-format text --listen 127.0.0.1:0
	--insecure-registry "$host")

say "tend validate examples/fleet"
"$tend" validate "$sandbox/fleet"

say "tend render --explain (device demo-01: which layer set what)"
"$tend" render --explain "${flags[@]}"

say "tend plan (device demo-01, nothing applied yet)"
"$tend" plan "${flags[@]}"

say "tend agent (schedule @every 2s), log in $sandbox/agent.log"
"$tend" agent "${flags[@]}" --log-level debug >"$sandbox/agent.log" 2>&1 &
agent=$!
config="$sandbox/root/etc/infer/config.yaml"
model="$sandbox/root/opt/models/detector"
wait_for 30 test -f "$config"
wait_for 30 grep -q 'msg=reconciled' "$sandbox/agent.log"
grep -E 'msg="?(applied|reconciled|model)' "$sandbox/agent.log" | sed 's/^/  /'
echo "  $config:"
sed 's/^/    /' "$config"
echo "  $model -> $(readlink "$model")"
ls -l "$model/" | sed 's/^/    /'
wait_for 30 test -f "$record"
echo "  tend logs service/infer:"
wait_for 30 bash -c '[[ -s "$1" ]]' _ "$sandbox/state/logs/infer/0.log"
"$tend" logs service/infer "${flags[@]}" | sed 's/^/    /'

say "the service is killed (SIGKILL): the agent restarts it at once"
old_pid=$(service_pid)
kill -KILL "$old_pid"
wait_for 30 bash -c 'p=$(sed -n "/\"pid\": /{s/.*\"pid\": \([0-9]*\).*/\1/p;q;}" "$1"); [[ -n "$p" && "$p" != "$2" ]] && kill -0 "$p"' _ "$record" "$old_pid"
wait_for 30 grep -q 'service restarted' "$sandbox/agent.log"
grep -E 'service (exited|started|restarted)' "$sandbox/agent.log" | tail -3 | sed 's/^/  /'

say "manual changes on the device: the config edited, a model file deleted"
want=$(cat "$config")
echo "threshold: 0.99  # edited by hand" >"$config"
sed 's/^/    /' "$config"
rm -f "$model/labels.txt"
echo "  rm $model/labels.txt"

say "the next tick reports the drift and reverts it"
wait_for 30 grep -q 'msg=drift' "$sandbox/agent.log"
wait_for 30 bash -c '[[ "$(cat "$1")" == "$2" ]]' _ "$config" "$want"
wait_for 30 test -f "$model/labels.txt"
grep -E 'msg=drift|drift=true' "$sandbox/agent.log" | sed 's/^/  /'
echo "  $config:"
sed 's/^/    /' "$config"
echo "  $model -> $(readlink "$model")"
ls -l "$model/" | sed 's/^/    /'

say "tend status (the agent's /status, for people)"
sleep 2.5 # one more tick: nothing left to do
addr=$(sed -n 's/.*msg="status server listening" listen=\([^ ]*\).*/\1/p' "$sandbox/agent.log" | head -1)
"$tend" status --listen "$addr" | sed 's/^/  /'

kill -TERM "$agent"
wait "$agent" || true
agent=''

say "tend plan --detailed-exitcode (converged: exit 0)"
"$tend" plan "${flags[@]}" --detailed-exitcode
say "the agent is stopped: services keep running; stopping the demo service and the registry"
stop_all
trap - EXIT
echo
echo "demo complete: sandbox left in $sandbox"
