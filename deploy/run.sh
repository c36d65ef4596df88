#!/usr/bin/env bash
# The main job: install dependencies, build (release) into build/release, and
# start the physd daemon on 127.0.0.1:7447 with an embedded demo world (and
# its HTTP side on 127.0.0.1:7448: /metrics, /healthz, /readyz, /ws).
# Watch it from another terminal: ./build/release/clients/physctl watch 1
# Before starting physd it prints the line that puts physctl and physload
# (build/release/clients) on the PATH of another terminal.
# Usage: deploy/run.sh [physd flags, see physd --help]
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DPHYSD_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)"
echo "run.sh: physctl and physload are in build/release/clients; in another terminal:"
echo "  export PATH=\"$PWD/build/release/clients:\$PATH\""
echo "run.sh: open http://127.0.0.1:7448/ (metrics at /metrics; docs/http.md)"
exec ./build/release/server/physd "$@"
