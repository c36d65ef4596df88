#!/usr/bin/env bash
# run_readme.sh — runs the shell examples of README.md's "Clients" section
# verbatim, in order, against a physd it starts, and checks each one.
#
# Usage: run_readme.sh README PHYSD_BIN CLIENTS_DIR EXPECT_FILE
#
# Normal path: start PHYSD_BIN --port 0 (with its demo world, world 1, as
# ./deploy/run.sh does) and read the port from its log; extract the lines
# of every ```sh block between "## Clients" and the next "## " heading; run
# each line with bash (errexit, pipefail) in a scratch directory, with
# nothing substituted: the port reaches physctl and physload through
# PHYSD_PORT and the built tools through PATH (CLIENTS_DIR first). Each
# line must exit 0 within 60 s and its stdout must match the extended
# regular expression that EXPECT_FILE gives for it ("PREFIX<TAB>REGEX"
# lines; the first prefix of the command line that matches applies; the
# regex ^$ means no output at all).
#
# Failure modes: a line that fails, times out, prints something else, or
# has no expectation (add one to EXPECT_FILE when the README changes) ends
# the check with exit 1, naming the line and showing its output; physd not
# starting is exit 1 too. Fewer than 5 commands found means the extraction
# broke: exit 1.
#
# Invariants: the lines run in order in one scratch directory (files one
# line writes are there for the next); the physd started here is stopped
# and the scratch directory removed on every exit.
set -uo pipefail
readme=$1 physd=$2 clients=$(cd "$3" && pwd) expect=$4

tmp=$(mktemp -d /tmp/physd-readme.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "run_readme: $*" >&2; exit 1; }

awk '/^## /{sec = ($0 == "## Clients")} sec && /^```sh$/{blk = 1; next} blk && /^```$/{blk = 0; next} sec && blk' \
  "$readme" >"$tmp/commands"
count=$(grep -c . "$tmp/commands")
[ "$count" -ge 5 ] || fail "found only $count command lines in the Clients section of $readme"

"$physd" --port 0 >"$tmp/physd.log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
  port=$(grep -o -- '--port [0-9]*' "$tmp/physd.log" | head -n 1 | cut -d' ' -f2)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/physd.log" >&2; fail "physd did not start"; }
export PHYSD_PORT=$port
export PATH="$clients:$PATH"
mkdir "$tmp/work"

n=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  n=$((n + 1))
  regex=
  while IFS=$'\t' read -r prefix re; do
    case "$prefix" in '' | '#'*) continue ;; esac
    if [ "${line#"$prefix"}" != "$line" ]; then regex=$re; break; fi
  done <"$expect"
  [ -n "$regex" ] || fail "README line $n has no expectation in $expect: $line"
  start=$(date +%s%N)
  (cd "$tmp/work" && timeout 60 bash -e -o pipefail -c "$line") >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$rc" != 0 ]; then
    echo "--- stdout" >&2; cat "$tmp/out" >&2; echo "--- stderr" >&2; cat "$tmp/err" >&2
    fail "README line $n exited $rc: $line"
  fi
  if { [ "$regex" = '^$' ] && [ -s "$tmp/out" ]; } || { [ "$regex" != '^$' ] && ! grep -Eq -- "$regex" "$tmp/out"; }; then
    echo "--- stdout" >&2; cat "$tmp/out" >&2; echo "--- stderr" >&2; cat "$tmp/err" >&2
    fail "README line $n: its output does not match /$regex/: $line"
  fi
  printf 'ok %2d %6d ms  %s\n' "$n" "$ms" "$line"
done <"$tmp/commands"
echo "run_readme: the $n command lines of the Clients section ran and printed what they should (physd on port $port)"
