#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, staticcheck, the tests
# under the race detector, and each fuzz target briefly. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt-ed:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== redis-server (a real Redis for redisstore's tests)"
# Installed when missing and this machine lets us (root, or sudo without a
# password), started on a free loopback port without persistence, stopped on
# exit. Under this script Redis tests fail, rather than skip, when there is no
# Redis.
export THROTTLE_REQUIRE_REDIS=1
if ! command -v redis-server >/dev/null 2>&1; then
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null || true
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null || true
	fi
fi
redis_pid=
redis_dir=$(mktemp -d)
stop_redis() {
	if [ -n "$redis_pid" ]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
		redis_pid=
	fi
}
trap 'stop_redis; rm -rf "$redis_dir"' EXIT
# redis_ping PORT: whether a Redis answers PING on the loopback port.
redis_ping() {
	( exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'PING\r\n' >&3 && read -r -t 1 reply <&3 &&
		[ "${reply%$'\r'}" = "+PONG" ] ) 2>/dev/null
}
if command -v redis-server >/dev/null 2>&1; then
	for _ in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 12000)) # below Linux's ephemeral ports
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			continue # taken
		fi
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--dir "$redis_dir" --loglevel warning >"$redis_dir/log" 2>&1 &
		redis_pid=$!
		for _ in $(seq 50); do
			if ! kill -0 "$redis_pid" 2>/dev/null; then
				break
			fi
			if redis_ping "$port"; then
				export REDIS_ADDR="127.0.0.1:$port"
				break 2
			fi
			sleep 0.1
		done
		stop_redis
	done
	if [ -z "${REDIS_ADDR:-}" ]; then
		echo "redis-server did not start:"; cat "$redis_dir/log"
	else
		echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on $REDIS_ADDR"
	fi
else
	echo "no redis-server, and it cannot be installed here: redisstore's tests will fail"
fi

echo "== go test -race"
go test -race -count=1 ./...

echo "== benchmarks, once each (so that one that no longer runs is found)"
if ! out=$(go test -run '^$' -bench . -benchtime 1x ./... 2>&1); then
	echo "$out"; exit 1
fi

echo "== bench module (its own go.mod: the peers it measures stay out of ours)"
(cd bench && go vet ./... && go test -count=1 ./...)

echo "== otelthrottle module (its own go.mod: OpenTelemetry stays out of ours)"
(cd otelthrottle && go vet ./... &&
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... &&
	go test -race -count=1 ./... &&
	if ! out=$(go test -run '^$' -bench . -benchtime 1x ./... 2>&1); then
		echo "$out"; exit 1
	fi)

echo "== fuzz (150,000 inputs each, about 10 s on 2 cores)"
# A count, not a duration: go1.26's fuzzing coordinator can fail a target
# with a bare "context deadline exceeded" when a -fuzztime duration ends
# while a worker is mid-input (go.dev/issue/75804, fixed in go1.27). The
# minimizing of each new input is bounded by a count too (its default, 60 s
# each, let one target run for minutes).
for pkg in . ./throttletest ./examples/bulk-uploader; do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		go test -run '^$' -fuzz "^${target}\$" -fuzztime 150000x -fuzzminimizetime 200x "$pkg"
	done
done
