#!/usr/bin/env bash
# Compares the overhead benchmark (bench/overhead_test.go) of two versions of
# the code, A and B, honestly on a noisy, shared machine: it builds one
# benchmark binary per side, then runs them one count at a time, interleaved
# and place-swapped (A B, B A, A B, ...), so that a drift of the machine's
# load falls on both sides alike; then benchstat compares them.
#
#	scripts/overhead-ab.sh [-n COUNTS] [-b BENCH] [A [B]]
#
# A and B are git revisions (A defaults to main, B to the work tree as it
# is, uncommitted changes included: "." names it). -n is the counts per
# side (default 20), -b the benchmark pattern (default Overhead). The raw
# results stay in the temporary folder printed at the end, as a.txt and
# b.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

n=20
bench=Overhead
while getopts "n:b:" opt; do
	case $opt in
	n) n=$OPTARG ;;
	b) bench=$OPTARG ;;
	*) sed -n '2,14p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
a=${1:-main}
b=${2:-.}

benchstat=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
tmp=$(mktemp -d)
echo "A = $a, B = $b; $n counts each, interleaved; in $tmp"

# build SIDE REV: the bench module's test binary of revision REV as
# $tmp/SIDE.test. A revision is exported with git archive (no worktree is
# added to the repository); "." is the work tree itself.
build() {
	local side=$1 rev=$2 src
	if [ "$rev" = . ]; then
		src=$root
	else
		src=$tmp/$side-src
		mkdir -p "$src"
		git archive "$rev" | tar -x -C "$src"
	fi
	(cd "$src/bench" && go test -c -o "$tmp/$side.test" .)
}
build a "$a"
build b "$b"

run() { # run SIDE: one count of the benchmark, appended to $tmp/SIDE.txt
	(cd "$root/bench" && "$tmp/$1.test" -test.run '^$' -test.bench "$bench" \
		-test.benchmem -test.count 1) >>"$tmp/$1.txt"
}
for i in $(seq "$n"); do
	if [ $((i % 2)) -eq 1 ]; then
		run a; run b
	else
		run b; run a
	fi
done

go run "$benchstat" a="$tmp/a.txt" b="$tmp/b.txt"
echo "raw results: $tmp/a.txt, $tmp/b.txt"
