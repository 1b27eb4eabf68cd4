#!/usr/bin/env bash
# Four bulk-uploader processes share one quota through Redis.
#
# The demo API (100 requests/s, bursts of 10) serves alone on a free port
# (bulk-uploader -serve), a redis-server runs on another, and four uploaders
# of 500 records each, every one paced at the whole quota, share it with
# -redis. At the end: each uploader's summary, what the API saw, and the
# whole job's time against its ideal. With the argument "alone", the same
# four run without -redis: four times too fast, and refused.
#
# Needs redis-server (Debian: apt-get install redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-shared}
if [ "$mode" != shared ] && [ "$mode" != alone ]; then
	echo "usage: $0 [shared|alone]" >&2; exit 2
fi
if ! command -v redis-server >/dev/null 2>&1; then
	echo "$0 needs redis-server (Debian: apt-get install redis-server)" >&2; exit 1
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"; return
		fi
	done
}
up() { # up PORT: wait until something listens on the loopback port
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return; fi
		sleep 0.05
	done
	echo "nothing listens on port $1" >&2; exit 1
}

go build -o "$tmp/bulk-uploader" ./examples/bulk-uploader
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning >"$tmp/redis.log" 2>&1 &
pids+=($!)
aport=$(free_port)
"$tmp/bulk-uploader" -serve "127.0.0.1:$aport" >"$tmp/api.txt" 2>"$tmp/api.log" &
api=$!
pids+=("$api")
up "$rport"
up "$aport"

shared=(-redis "127.0.0.1:$rport")
if [ "$mode" = alone ]; then shared=(); fi
echo "four uploaders of 500 records each, every one paced at the whole quota (100/s, bursts of 10), $mode..."
start=$(date +%s.%N)
ups=()
for i in 1 2 3 4; do
	"$tmp/bulk-uploader" -target "http://127.0.0.1:$aport" -api-key demo "${shared[@]}" -n 500 >"$tmp/up$i.txt" 2>/dev/null &
	ups+=($!)
done
status=0
for p in "${ups[@]}"; do wait "$p" || status=1; done
end=$(date +%s.%N)
kill -INT "$api"
wait "$api" || true

for i in 1 2 3 4; do
	echo; echo "uploader $i:"; sed -n '/^  /p' "$tmp/up$i.txt"
done
cat "$tmp/api.txt"
awk -v s="$start" -v e="$end" 'BEGIN {
	ideal = (2000 - 10) / 100
	printf "whole job: 2,000 records in %.2fs; the quota allows it in %.2fs at best: %.2f×\n", e - s, ideal, (e - s) / ideal
}'
exit $status
