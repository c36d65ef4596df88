#!/usr/bin/env bash
# Builds the libFuzzer target (clang, -DPHYSD_FUZZ=ON) in its own build
# directory, replays the seed corpus and the regression inputs through it,
# then fuzzes for a bounded time. docs/fuzzing.md has the details.
#
# Usage: tests/fuzz/fuzz.sh [--time SECONDS] [--build-dir DIR] [--cc CLANG]
#                           [--ci] [--no-build | --build-only]
#                           [--ws | --snapshot | --journal | --compact]
#                           [-- LIBFUZZER FLAGS...]
#   --time S       fuzz for S seconds after the replay (default 600; 0: replay only)
#   --build-dir D  the clang build directory (default build/fuzz)
#   --cc C         the clang to use (default: clang)
#   --ci           what the ctest fuzz_libfuzzer_smoke runs: new inputs go to
#                  a scratch directory (the repository's corpus is not
#                  touched), a missing libFuzzer is a skip (exit 77), and
#                  PHYSD_FUZZ_CI_SECONDS overrides --time
#   --no-build     use the binary already in the build directory
#   --build-only   build, then stop (with --ci a missing clang or libFuzzer
#                  is a message and exit 0: the build goes on, the smoke
#                  test itself reports the skip)
#   --ws           the WebSocket target instead (physd_fuzz_ws: session
#                  scripts for the connection behind /ws, seeds corpus_ws/)
#   --snapshot     the snapshot target instead (physd_fuzz_snapshot: bytes
#                  for ph_world_restore, seeds corpus_snapshot/, its own
#                  dictionary snapshot.dict)
#   --journal      the journal target instead (physd_fuzz_journal: bytes
#                  replayed as a world's journal, seeds corpus_journal/, its
#                  own dictionary journal.dict)
#   --compact      the compact target instead (physd_fuzz_compact: body
#                  sections for the compact frame decoder, seeds
#                  corpus_compact/, no dictionary)
# Without --ci the new inputs go to D/work/corpus and crashes to
# D/work/artifacts/ (crash-<sha1>, leak-..., timeout-..., oom-...).
# Exit status: 0 clean, 1 a crash/leak/timeout (libFuzzer's message and the
# artifact's path are printed), 77 libFuzzer unavailable (--ci).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds=600
build="$root/build/fuzz"
cc=clang
ci=0
do_build=1
build_only=0
target=physd_fuzz
seeds=(corpus regress)
dict=physd.dict
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --cc) cc="$2"; shift 2 ;;
    --ci) ci=1; shift ;;
    --no-build) do_build=0; shift ;;
    --build-only) build_only=1; shift ;;
    --ws) target=physd_fuzz_ws; seeds=(corpus_ws); shift ;;
    --snapshot) target=physd_fuzz_snapshot; seeds=(corpus_snapshot); dict=snapshot.dict; shift ;;
    --journal) target=physd_fuzz_journal; seeds=(corpus_journal); dict=journal.dict; shift ;;
    --compact) target=physd_fuzz_compact; seeds=(corpus_compact); dict=; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$ci" = 1 ] && [ -n "${PHYSD_FUZZ_CI_SECONDS:-}" ]; then seconds="$PHYSD_FUZZ_CI_SECONDS"; fi

skip() {
  echo "fuzz.sh: SKIP: $*"
  if [ "$build_only" = 1 ]; then exit 0; fi
  exit 77
}
command -v "$cc" >/dev/null 2>&1 || { [ "$ci" = 1 ] && skip "no $cc"; echo "fuzz.sh: no $cc (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

# libFuzzer comes with compiler-rt (Debian: libclang-rt-14-dev).
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
  [ "$ci" = 1 ] && skip "$cc cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)"
  echo "fuzz.sh: $cc cannot link -fsanitize=fuzzer: apt-get install libclang-rt-14-dev" >&2
  exit 2
fi

if [ "$do_build" = 1 ]; then
  cxx="${cc/clang/clang++}"
  command -v "$cxx" >/dev/null 2>&1 || cxx=""
  # -O1 -g1: a third of the compile time of -O2 -g, and the fuzzer is as fast.
  # No viewer: the harness drives the connection, not the embedded page, and
  # the viewer's npm ci and bundle would only cost the fuzz build time.
  # --ci: the core's vector passes in their baseline build only (the same
  # numbers; the three instrumented builds of solver_wide.c's always-inlined
  # passes were most of the smoke's time). A longer run keeps all three.
  variants=ON
  if [ "$ci" = 1 ]; then variants=OFF; fi
  cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} \
        -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DPHYSD_SIMD_VARIANTS="$variants" \
        -DPHYSD_FUZZ=ON -DPHYSD_TESTS=OFF -DPHYSD_BENCH=OFF -DPHYSD_VIEWER=OFF -DPHYSD_WERROR=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target "$target"
fi
bin="$build/tests/fuzz/$target"
[ -x "$bin" ] || { echo "fuzz.sh: $bin not built" >&2; exit 2; }
if [ "$build_only" = 1 ]; then echo "fuzz.sh: built $bin"; exit 0; fi

work="$build/work${target#physd_fuzz}"
if [ "$ci" = 1 ]; then work="$probe/work"; fi
mkdir -p "$work/corpus" "$work/artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
flags=(${dict:+-dict="$here/$dict"} -max_len=65546 -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$work/artifacts/")
# CI fuzzes from a fixed seed (PHYSD_FUZZ_CI_SEED, default 1), so that its
# run mutates the same way each time: a failure there is a finding to fix,
# not luck. Long runs by hand take libFuzzer's random seed.
if [ "$ci" = 1 ]; then flags+=(-seed="${PHYSD_FUZZ_CI_SEED:-1}"); fi

seed_dirs=()
for d in "${seeds[@]}"; do seed_dirs+=("$here/$d"); done
echo "fuzz.sh: replaying ${seed_dirs[*]}"
"$bin" "${flags[@]}" -runs=0 "${seed_dirs[@]}"

if [ "$seconds" -gt 0 ]; then
  echo "fuzz.sh: fuzzing for $seconds s (new inputs: $work/corpus, crashes: $work/artifacts/)"
  if ! "$bin" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 "${extra[@]}" \
       "$work/corpus" "${seed_dirs[@]}"; then
    echo "fuzz.sh: FAILED: libFuzzer found a crash; artifacts:" >&2
    ls -l "$work/artifacts/" >&2 || true
    if [ "$ci" = 1 ]; then
      for f in "$work/artifacts/"*; do
        [ -f "$f" ] || continue
        echo "== $f (base64, decode into tests/fuzz/regress/ to keep it):" >&2
        base64 -w 0 <"$f" >&2; echo >&2
      done
    fi
    exit 1
  fi
fi
echo "fuzz.sh: passed"
