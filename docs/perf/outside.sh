#!/bin/sh
# outside.sh [RUNS] [OUTSIDE_DIR]: the core ratios as a client sees them.
# Builds this tree's binaries, starts `continuityd run` with a config of one
# agent in a scratch directory, runs the standalone measuring program
# (default ../shared/bench/outside beside the checkout) RUNS times (5)
# against it, each once the outbox has drained, and prints each run's
# line, then the checkpoints answered with anything but 200 (none, or the
# figures are not the core path's) and the median and range of
# ack_vs_durable_server, resume_ratio and vs_group_commit. The daemon is
# stopped and the scratch directory removed at the end.
set -eu
runs=${1:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
outside=${2:-$root/../shared/bench/outside}
[ -d "$outside" ] || outside=$root/../../shared/bench/outside # from a worktree
tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
(cd "$root" && go build -o "$tmp/bin/" ./cmd/...)
(cd "$outside" && go build -o "$tmp/bin/outside" .)
mkdir -p "$tmp/wd" "$tmp/bench"
cat >"$tmp/cfg.toml" <<CFG
[daemon]
state_dir = "$tmp/state"
socket = "$tmp/d.sock"

[[agent]]
name = "a1"
workdir = "$tmp/wd"
CFG
"$tmp/bin/continuityd" run --config "$tmp/cfg.toml" 2>"$tmp/daemon.log" &
pid=$!
i=0
until curl -sf --unix-socket "$tmp/d.sock" http://d/healthz >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "the daemon did not come up:" >&2
		cat "$tmp/daemon.log" >&2
		exit 1
	fi
	sleep 0.1
done
# drained waits until the outbox has shipped every write to the local
# archive (rate-limited to 1000 writes/s by default): a run started on the
# last one's backlog would fill the outbox, and the refusals (507
# SPOOL_FULL, answered without a commit) would count as writes.
drained() {
	i=0
	until st=$(curl -sf --unix-socket "$tmp/d.sock" http://d/v1/status) &&
		! printf '%s' "$st" | grep -q '"pending":[1-9]'; do
		i=$((i + 1))
		if [ "$i" -gt 1200 ]; then
			echo "the outbox did not drain in 2 minutes" >&2
			exit 1
		fi
		sleep 0.1
	done
}
for _ in $(seq "$runs"); do
	drained
	"$tmp/bin/outside" "$tmp/d.sock" "$tmp/bench" a1 | tee -a "$tmp/runs.txt"
done
refused=$(curl -sf --unix-socket "$tmp/d.sock" http://d/metrics | sed -n 's/^continuityd_request_seconds_count{route="\/v1\/continuity\/checkpoint",status="\([^2][0-9]*\)"} \([0-9]*\)$/\1: \2/p')
echo "checkpoints not answered 200: ${refused:-none}"
for key in ack_vs_durable_server resume_ratio vs_group_commit; do
	tr ' ' '\n' <"$tmp/runs.txt" | sed -n "s/^$key=//p" | sort -n |
		awk -v k="$key" '{v[NR]=$1} END {printf "%s median %s (%s-%s, %d runs)\n", k, v[int((NR+1)/2)], v[1], v[NR], NR}'
done
