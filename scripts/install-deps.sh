#!/usr/bin/env bash
# Installs, from Debian 12 packages, everything lockd needs to build, run and
# test: compilers (scripts/test.sh builds with clang, whose sanitizer runtimes
# are libclang-rt; ccache speeds rebuilds), gRPC/protobuf, backend client
# libraries, and the Redis (server and Sentinel),
# MariaDB and ZooKeeper servers the test suite starts by itself, openssl (the
# TLS tests make their certificates), Prometheus (promtool checks the alert
# rules; a real Prometheus server scrapes a test lockd), pip, setuptools, wheel
# and venv (scripts/release.sh builds the Python client's wheel offline; the
# client's own suite runs in a venv with packages from PyPI, made by
# clients/python/prepare.sh), and the container and
# Kubernetes tooling of the deploy tests (podman with runc, mmdebstrap for the
# base images, Node.js and npm for Helm and the schemas), and mkdocs (the test
# suite builds the documentation site).
# Installs only what is missing; safe to run repeatedly.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libhiredis-dev libmariadb-dev libzookeeper-mt-dev libyaml-cpp-dev prometheus-cpp-dev libssl-dev
  libgtest-dev libgmock-dev grpc-proto
  redis-server redis-sentinel mariadb-server zookeeper default-jre-headless openssl prometheus
  python3 python3-grpcio python3-grpc-tools python3-redis python3-kazoo python3-yaml
  python3-pip python3-setuptools python3-wheel python3-venv
  podman runc catatonit mmdebstrap iptables
  mkdocs
)
# Node.js and npm may come from another source than Debian (a newer nodejs
# package that bundles npm, and conflicts with Debian's npm): only when the
# commands are missing are Debian's packages added.
command -v node >/dev/null || PACKAGES+=(nodejs)
command -v npm >/dev/null || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Services are started by lockd's own scripts and tests, never by the system.
printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
$SUDO chmod +x /usr/sbin/policy-rc.d
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
$SUDO rm -f /usr/sbin/policy-rc.d
echo "install-deps: done"
