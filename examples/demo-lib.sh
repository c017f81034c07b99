# Helpers the demo scripts share: sourced, not run.

if [[ -t 1 ]]; then # bold headings on a terminal only
	say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	say() { printf '\n== %s\n' "$*"; }
fi
wait_for() { # wait_for SECONDS CMD... : poll until CMD succeeds
	local deadline=$((SECONDS + $1)); shift
	until "$@"; do
		if ((SECONDS >= deadline)); then echo "timed out waiting for: $*" >&2; return 1; fi
		sleep 0.2
	done
}
gone() { # gone PID: the process has exited (a zombie no one reaped counts)
	! kill -0 "$1" 2>/dev/null || [[ "$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)" == Z ]]
}
