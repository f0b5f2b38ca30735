#!/bin/sh
# Builds the Go examples into OUTDIR (default examples/go/dist): OUTDIR/triad-go-agent, OUTDIR/triad-go-client.
# GOPATH mode with Debian's Go packages; nothing is downloaded. Needs:
#   apt-get install -y golang-go golang-github-nats-io-go-nats-dev golang-github-vmihailenco-msgpack.v5-dev
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/dist}" && cd "${1:-$here/dist}" && pwd)
# The examples import each other as triadgo/...: a private GOPATH entry links that name to this folder.
gopath="$out/gopath"
mkdir -p "$gopath/src"
ln -sfn "$here" "$gopath/src/triadgo"
export GO111MODULE=off GOPATH="/usr/share/gocode:$gopath" GOFLAGS=
cd "$gopath/src/triadgo"
unformatted=$(gofmt -l triad agent client)
[ -z "$unformatted" ] || { echo "not gofmt-formatted (run gofmt -w): $unformatted" >&2; exit 1; }
go vet ./triad ./agent ./client
go build -o "$out/triad-go-agent" ./agent
go build -o "$out/triad-go-client" ./client
echo "built $out/triad-go-agent and $out/triad-go-client"
