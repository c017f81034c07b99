#!/usr/bin/env bash
# The whole loop on one machine, offline: a fleet repo made from
# examples/fleet, the agent for demo-01 in a sandbox folder, a plan, an apply,
# a hand edit on the "device", and the edit reverted on the next tick.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
tend=${TEND:-$top/bin/tend}
sandbox=${DEMO_DIR:-$top/.demo}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
wait_for() { # wait_for SECONDS CMD... : poll until CMD succeeds
	local deadline=$((SECONDS + $1)); shift
	until "$@"; do
		if ((SECONDS >= deadline)); then echo "timed out waiting for: $*" >&2; return 1; fi
		sleep 0.2
	done
}

rm -rf "$sandbox"
mkdir -p "$sandbox/root"
say "fleet repo: $sandbox/fleet (from examples/fleet)"
cp -R "$here/fleet" "$sandbox/fleet"
git -C "$sandbox/fleet" init -q -b main
git -C "$sandbox/fleet" add -A
git -C "$sandbox/fleet" -c user.name=demo -c user.email=demo@example.com -c commit.gpgsign=false commit -q -m "example fleet"
find "$sandbox/fleet/devices" -type f | sed "s|$sandbox/fleet/|  |" | sort

flags=(--config "$here/agent.yaml" --repo "$sandbox/fleet" --root "$sandbox/root"
	--state-dir "$sandbox/state" --schedule "@every 2s" --jitter 0s --log-format text)

say "tend validate examples/fleet"
"$tend" validate "$sandbox/fleet"

say "tend plan (device demo-01, nothing applied yet)"
"$tend" plan "${flags[@]}"

say "tend agent (schedule @every 2s), log in $sandbox/agent.log"
"$tend" agent "${flags[@]}" >"$sandbox/agent.log" 2>&1 &
agent=$!
trap 'kill $agent 2>/dev/null || true' EXIT
config="$sandbox/root/etc/infer/config.yaml"
wait_for 30 test -f "$config"
wait_for 30 grep -q 'msg=reconciled' "$sandbox/agent.log"
grep -E 'msg=(applied|reconciled)' "$sandbox/agent.log" | sed 's/^/  /'
echo "  $config:"
sed 's/^/    /' "$config"

say "a manual change on the device"
want=$(cat "$config")
echo "threshold: 0.99  # edited by hand" >"$config"
sed 's/^/    /' "$config"

say "the next tick reports the drift and reverts it"
wait_for 30 grep -q 'msg=drift' "$sandbox/agent.log"
wait_for 30 bash -c '[[ "$(cat "$1")" == "$2" ]]' _ "$config" "$want"
grep -E 'msg=drift|drift=true' "$sandbox/agent.log" | sed 's/^/  /'
echo "  $config:"
sed 's/^/    /' "$config"

kill -TERM "$agent"
wait "$agent" || true
trap - EXIT

say "tend plan --detailed-exitcode (converged: exit 0)"
"$tend" plan "${flags[@]}" --detailed-exitcode
echo
echo "demo complete: sandbox left in $sandbox"
