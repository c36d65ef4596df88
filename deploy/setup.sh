#!/usr/bin/env bash
# Installs physd's build and test dependencies from Debian's packages.
# Idempotent: installs only what is missing; runs apt-get update at most once.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libuv1-dev libprotobuf-c-dev protobuf-c-compiler
      libcmocka-dev libode-dev libbullet-dev
      libssl-dev openssl python3-protobuf protobuf-compiler
      libwebsockets-dev libwebsockets-evlib-uv prometheus python3-websocket
      python3-venv python3-setuptools python3-wheel python3-pip
      libsystemd-dev libcurl4-openssl-dev libjson-c-dev python3-yaml python3-jsonschema systemd curl)
# libssl-dev: TLS (server/tls.c, clients/lib/pc_tls.c); openssl: the tests'
# certificates; python3-protobuf, protobuf-compiler: the Python TLS client test.
# libwebsockets-dev, libwebsockets-evlib-uv: the HTTP side (server/http.c,
# docs/http.md); prometheus: promtool for the /metrics test; python3-websocket:
# the Python WebSocket client test. python3-venv, python3-setuptools,
# python3-wheel, python3-pip: pip installs the Python client (clients/python)
# into a venv that sees Debian's packages, built offline (docs/clients.md).
# chromium: the viewer's browser test (tests/viewer, headless, driven by
# playwright-core from npm; never a downloaded browser).
# node, npm: the viewer's build (clients/viewer: npm ci, esbuild) — from
# Debian below unless a node is already installed (this machine's comes from
# nodesource, whose nodejs package includes npm).
PKGS+=(chromium)
if ! command -v node >/dev/null 2>&1; then PKGS+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then PKGS+=(npm); fi
# libsystemd-dev: sd_notify (server/notify.c);
# libcurl4-openssl-dev, libjson-c-dev: the Agones SDK's REST API (server/agones.c);
# python3-yaml, python3-jsonschema: the Kubernetes manifests' checks; systemd:
# systemd-analyze verify of the unit; curl: the container's health check
# (tests/deploy/, docs/deploy.md).
# --with-fuzz (deploy/test.sh): clang and its libFuzzer runtime, for the
# coverage-guided fuzzing run of the tests (tests/fuzz/), and clang-format,
# for the test that every source file follows .clang-format.
if [ "${1:-}" = "--with-fuzz" ]; then PKGS+=(clang libclang-rt-14-dev clang-format); fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
