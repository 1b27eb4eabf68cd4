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

echo "== go test -race"
go test -race -count=1 ./...

echo "== bench module (its own go.mod: the peers it measures stay out of ours)"
(cd bench && go vet ./... && go test -count=1 ./...)

echo "== fuzz (10s each)"
for pkg in . ./throttletest ./examples/bulk-uploader; do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		go test -run '^$' -fuzz "^${target}\$" -fuzztime 10s "$pkg"
	done
done
