#!/usr/bin/env bash
# Prepares the Go client for its suite (ctest go_client_test), as every
# clients/<language>/prepare.sh does: the module's dependencies from the Go
# module proxy, gofmt and `go vet`, and the test binaries compiled with
# -race into BUILD_DIR/clients/go (which also fills Go's build cache, so the
# `go test -race` that follows only runs). The gRPC stubs (lockdv1/) are
# committed: a Go module is a source distribution (protos/generate.sh
# BUILD_DIR go regenerates them). Needs nothing the C++ build makes;
# idempotent, seconds when already done.
#
# Usage: clients/go/prepare.sh BUILD_DIR
set -euo pipefail

build=${1:?usage: clients/go/prepare.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v go >/dev/null; then
  echo "prepare.sh: go not found (Go 1.26 or later is needed)" >&2
  exit 1
fi
mkdir -p "$build"
out=$(cd "$build" && pwd)/clients/go
mkdir -p "$out"
cd "$here"
go mod download
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "prepare.sh: not gofmt-formatted: $unformatted" >&2
  exit 1
fi
go vet ./...
go build ./...
go test -race -c -o "$out/" ./...
