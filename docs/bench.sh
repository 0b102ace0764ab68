#!/usr/bin/env bash
# Runs every benchmark docs/PERFORMANCE.md quotes, in one go, on this
# machine. Each benchmark reports its own medians and the baseline measured
# in the same run (raw fsync, a static handler on the same kind of socket,
# a minimal hook process and /bin/true, the writer's own CPU), so the
# ratios are what to compare. The socket, store and hook benchmarks run five
# times (the disk of a shared machine is noisy) and are followed by the
# median of each figure over the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores"
# medians prints a benchmark's raw output, then the medians over its runs.
medians() {
	local out
	out=$(mktemp)
	cat >"$out"
	cat "$out"
	awk -f docs/benchmedian.awk "$out"
	rm -f "$out"
}
go test -run '^$' -bench 'DurableAck|Resume$|ResumeSmall|ConcurrentWriters' -benchtime 2000x -count 5 ./daemon/ 2>&1 | medians
BENCH_NO_UPSTREAM=1 go test -run '^$' -bench 'DurableAck|ConcurrentWriters' -benchtime 2000x -count 5 ./daemon/ 2>&1 | medians
go test -run '^$' -bench 'StoreCheckpoint|StoreConcurrentWriters' -benchtime 2000x -count 5 ./daemon/residency/ 2>&1 | medians
go test -run '^$' -bench 'DrainBacklog|Coalescing' -benchtime 1x -count 1 ./daemon/
go test -run '^$' -bench SnapshotBurstCPU -benchtime 20x -count 1 ./daemon/
go test -run '^$' -bench 'HookWallTime' -benchtime 100x -count 5 ./cmd/continuityd/ 2>&1 | medians
go test -run '^$' -bench 'MCPStartupAndResume' -benchtime 200x -count 1 ./cmd/continuityd/
go test -run '^$' -bench 'MCPStdioServerSide' -benchmem -count 5 ./daemon/api/ 2>&1 | medians
# needs `npm ci --prefix cmd/continuityd/testdata/mcpref` (skipped without it)
go test -run '^$' -bench 'MCPStdioVsReference' -benchtime 7x -count 2 ./cmd/continuityd/
go test -run '^$' -bench 'EventsCPU|WatchRSS|IdleCPU' -benchtime 1x -count 1 ./daemon/sources/watch/
go test -run '^$' -bench 'CheckSecret|DecodeCheckpoint' -benchmem -count 1 ./capsule/guard/
go test -run '^$' -bench RestingMemory -benchtime 1x -count 2 ./cmd/continuityd/
