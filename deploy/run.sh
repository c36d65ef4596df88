#!/usr/bin/env bash
# The main job: install dependencies, build (release), run physd's demo.
# Usage: deploy/run.sh [demo arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DPHYSD_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)"
exec ./build/release/core/physd-demo "$@"
