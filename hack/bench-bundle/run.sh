#!/usr/bin/env bash
# Runs kdag's benchmarks from the bundle `make bench-bundle` writes (docs/benchmarks.md, "Many
# cores"). Needs Linux amd64, bash and coreutils; no Go, no network.
#
# Usage: ./run.sh RESULTS_DIR [GROUP...]
#   GROUP: converge, scale, replicas, noop, scheduler (default: all five, in that order)
# Environment (each optional):
#   FILTER     replaces every group's -test.bench regexp (for a quick check of the bundle)
#   COUNT      runs of each benchmark (-test.count); default 6 (benchstat's 95 % interval needs 6),
#              2 for scale and replicas
#   BENCHTIME  -test.benchtime; default per group (converge 6x, noop 400x, scale 1x)
#   TIMEOUT    -test.timeout of each group; default 120m
#   BUDGET     seconds for all the groups together (a lent machine's time): a group still running
#              when it is spent is interrupted (its partial output kept), the groups after it skipped
#
# RESULTS_DIR gets one <group>.txt per group (benchmark output, benchstat's format), a
# <group>.summary.txt from the bundled benchstat, machine.txt (CPU, memory, kernel, the bundle's
# commit) and load.txt (uptime before and after each group: the figures are only comparable on a
# quiet machine).
set -euo pipefail

if [[ $# -lt 1 ]]; then
	sed -n '5,20p' "$0" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
groups=("$@")
[[ ${#groups[@]} -gt 0 ]] || groups=(converge scale replicas noop scheduler)

# The envtest control plane of the bundle (kube-apiserver, etcd), never one on PATH.
export KUBEBUILDER_ASSETS=$here/bin
timeout=${TIMEOUT:-120m}
deadline=$((SECONDS + ${BUDGET:-1000000000}))

{
	echo "bundle: $(cat "$here/VERSION")"
	echo "date: $(date -u +%FT%TZ)"
	echo "kernel: $(uname -srm)"
	echo "cpus: $(nproc)"
	grep -m1 'model name' /proc/cpuinfo || true
	grep -m1 MemTotal /proc/meminfo || true
} > "$out/machine.txt"

# run GROUP TESTBINARY DEFAULT_BENCH DEFAULT_BENCHTIME DEFAULT_COUNT [EXTRA_FLAG...]
run() {
	local group=$1 binary=$2 bench=$3 benchtime=$4 count=$5
	shift 5
	echo "$group before: $(uptime)" >> "$out/load.txt"
	echo "== $group: $binary -test.bench '${FILTER:-$bench}'" >&2
	# Each group runs in a scratch directory of its own: the tests write nothing into the bundle.
	local left=$((deadline - SECONDS))
	if ((left < 30)); then
		echo "$group skipped: BUDGET spent (${left}s left)" | tee -a "$out/load.txt" >&2
		return
	fi
	local work rc=0
	work=$(mktemp -d)
	(cd "$work" && timeout -s INT "$left" "$here/$binary" -test.run '^$' -test.bench "${FILTER:-$bench}" \
		-test.benchtime "${BENCHTIME:-$benchtime}" -test.count "${COUNT:-$count}" -test.timeout "$timeout" "$@") \
		| tee "$out/$group.txt" || rc=$?
	if ((rc == 124)); then
		echo "$group interrupted: BUDGET spent" | tee -a "$out/load.txt" >&2
		# An interrupted test binary leaves its envtest control plane running.
		pkill -9 -f "$here/bin/kube-apiserver" || true
		pkill -9 -f "$here/bin/etcd" || true
	elif ((rc != 0)); then
		exit "$rc"
	fi
	rm -rf "$work"
	echo "$group after: $(uptime)" >> "$out/load.txt"
	"$here/bin/benchstat" "$out/$group.txt" > "$out/$group.summary.txt" 2>&1 || true
}

for g in "${groups[@]}"; do
	case $g in
	converge) run converge controller.test 'BenchmarkConverge$|BenchmarkConverge_RTT$|BenchmarkConverge_Parallel$' 6x 6 ;;
	scale) run scale controller.test 'BenchmarkScale$' 1x 2 ;;
	replicas) run replicas controller.test 'BenchmarkScaleReplicas$' 1x 2 ;;
	noop) run noop controller.test 'BenchmarkReconcile/nodes=100/state=noop$' 400x 6 ;;
	scheduler) run scheduler graph.test 'BenchmarkRun$' 1s 6 -test.benchmem ;;
	*)
		echo "unknown group $g: want converge, scale, replicas, noop or scheduler" >&2
		exit 2
		;;
	esac
done
echo "results in $out" >&2
