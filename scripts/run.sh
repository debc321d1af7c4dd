#!/usr/bin/env bash
# Quick start: installs what is missing (Debian 12 packages), builds lockd
# and the lockctl CLI ($BUILD_DIR/tools/lockctl/lockctl), and runs lockd in
# the foreground. With no arguments it serves the in-memory
# backend on 127.0.0.1:7411; any arguments are passed to lockd, e.g.
#   scripts/run.sh --backend=redis --redis.addresses=127.0.0.1:6379
#   scripts/run.sh --config deploy/lockd.example.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build/release}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKD_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD_DIR" --target lockd lockctl
echo "run.sh: the CLI is $BUILD_DIR/tools/lockctl/lockctl (try: $BUILD_DIR/tools/lockctl/lockctl list)"
exec "$BUILD_DIR/service/lockd" "$@"
