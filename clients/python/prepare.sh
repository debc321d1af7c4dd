#!/usr/bin/env bash
# Prepares the Python client's test suite: usage  clients/python/prepare.sh BUILD_DIR
#
# Under BUILD_DIR/clients/python: venv/, a virtual environment of $LOCKD_PYTHON
# (default python3: any CPython >= 3.9 with venv; not Debian's packages)
# holding pytest and the client; dist/, the client's wheel, built the way a
# user's `pip install ./clients/python` builds it (build isolation: setuptools
# and grpcio-tools from the package index) from a copy of the sources in src/;
# the wheel is then installed with its dependencies (grpcio, protobuf) from
# the package index. Versions: constraints.txt. Needs nothing the C++ build
# makes. Idempotent: when the package's sources, constraints.txt and the
# python are those of the last successful run (a stamp of their hash), it
# does nothing (the tests run from clients/python/tests, not from the venv).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1/clients/python"
out=$(cd "$1/clients/python" && pwd)
python=${LOCKD_PYTHON:-python3}

# scripts/test.sh runs this beside ctest's own run of it: one at a time.
exec 9>"$out/.prepare.lock"
flock 9

inputs() {
  "$python" -c 'import sys; print(sys.executable, sys.version)'
  cd "$root"
  find clients/python/lockd -name '*.py' -o -name py.typed | LC_ALL=C sort |
    xargs sha256sum
  sha256sum clients/python/{pyproject.toml,setup.py,gen_stubs.py,MANIFEST.in,README.md,constraints.txt} \
    clients/python/prepare.sh protos/lockd/v1/lock.proto protos/google/rpc/*.proto LICENSE VERSION
}
stamp=$(inputs | sha256sum | cut -d' ' -f1)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && "$out/venv/bin/python" -c 'import lockd' 2>/dev/null; then
  exit 0
fi
rm -f "$out/.stamp"

export PIP_CONSTRAINT="$here/constraints.txt" PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONHOME
[ -x "$out/venv/bin/python" ] || "$python" -m venv "$out/venv"
pip=("$out/venv/bin/python" -m pip --quiet)
"${pip[@]}" install pytest pytest-timeout

# A copy in the repository's layout (setup.py reads ../../protos, the LICENSE
# link points at ../../LICENSE), so the source tree gets no build/ or egg-info.
rm -rf "$out/src" "$out/dist"
mkdir -p "$out/src/clients"
cp -r "$here" "$out/src/clients/python"
rm -rf "$out/src/clients/python/"{build,dist} "$out/src/clients/python/"*.egg-info
cp -r "$root/protos" "$out/src/protos"
cp "$root/LICENSE" "$out/src/LICENSE"
"${pip[@]}" wheel --no-deps --wheel-dir "$out/dist" "$out/src/clients/python"

"${pip[@]}" uninstall --yes lockd-client 2>/dev/null || true
"${pip[@]}" install "$out/dist"/lockd_client-*-py3-none-any.whl
echo "$stamp" >"$out/.stamp"
