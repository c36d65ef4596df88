#!/usr/bin/env bash
# Every test: install dependencies, build with ASan + UBSan and warnings as
# errors into build/test, run all tests with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/setup.sh --with-fuzz
# PHYSD_FUZZ_SMOKE: ctest also builds the libFuzzer target with clang (its
# own build directory) and fuzzes the connection for 30 s (tests/fuzz/).
cmake -S . -B build/test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPHYSD_SANITIZE=ON -DPHYSD_WERROR=ON -DPHYSD_O0_CHECK=ON \
      -DPHYSD_FUZZ_SMOKE=ON >/dev/null
cmake --build build/test -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build/test --output-on-failure -j"$(nproc)"
