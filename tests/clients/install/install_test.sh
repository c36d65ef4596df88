#!/usr/bin/env bash
# install_test.sh — the install as a user meets it: `cmake --install BUILD
# --prefix P` into a temporary P, then a program compiled against it with
# `cc app.c $(pkg-config --cflags --libs physd-client)` runs against a
# physd started here; the installed physctl pings the same server; and the
# prefix still works after being moved (the .pc file is relocatable).
#
# Usage: install_test.sh BUILD_DIR PHYSD_BIN C_COMPILER APP_SOURCE [EXTRA_CFLAGS...]
# (EXTRA_CFLAGS: the sanitizer flags of a sanitizer build, whose archives
# need them.) Exit 0 when every step worked; otherwise the failing step is
# named on stderr.
set -euo pipefail
build=$1 physd_build=$2 cc=$3 app_src=$4
shift 4
extra=("$@")

tmp=$(mktemp -d /tmp/physd-install-test.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$tmp/prefix" -name physd-client.pc | head -n 1)
[ -n "$pc" ] || fail "no physd-client.pc under $tmp/prefix"
grep -q '^prefix=\${pcfiledir}/' "$pc" || fail "$pc: prefix is not relative to the file: $(grep '^prefix=' "$pc")"
for f in bin/physctl bin/physload include/physd/pc_client.h include/physd/v1/physd.pb-c.h; do
  [ -e "$tmp/prefix/$f" ] || fail "not installed: $f"
done

# The daemon: installed once server/CMakeLists.txt installs it, else the build's.
physd=$physd_build
[ -x "$tmp/prefix/bin/physd" ] && physd=$tmp/prefix/bin/physd
"$physd" --port 0 >"$tmp/physd.log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
  port=$(grep -o -- '--port [0-9]*' "$tmp/physd.log" | head -n 1 | cut -d' ' -f2 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/physd.log" >&2; fail "physd did not start"; }

build_and_run() {
  local prefix=$1
  export PKG_CONFIG_PATH
  PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name physd-client.pc | head -n 1)")
  local flags
  flags=$(pkg-config --cflags --libs physd-client) || fail "pkg-config --cflags --libs physd-client failed"
  case "$flags" in *"$prefix"*) ;; *) fail "pkg-config flags do not point into $prefix: $flags" ;; esac
  # shellcheck disable=SC2086
  "$cc" "${extra[@]}" -o "$tmp/app" "$app_src" $flags || fail "cc app.c \$(pkg-config ...) failed ($flags)"
  "$tmp/app" 127.0.0.1 "$port" >"$tmp/app.out" 2>&1 || { cat "$tmp/app.out" >&2; fail "app failed"; }
  grep -q '^connected to physd ' "$tmp/app.out" || fail "app: $(cat "$tmp/app.out")"
  grep -q '^pong$' "$tmp/app.out" || fail "app: no pong: $(cat "$tmp/app.out")"
  grep -q '^worlds 1$' "$tmp/app.out" || fail "app: not the demo world: $(cat "$tmp/app.out")"
  "$prefix/bin/physctl" --port "$port" ping >"$tmp/ping.out" 2>&1 || { cat "$tmp/ping.out" >&2; fail "installed physctl ping failed"; }
}

build_and_run "$tmp/prefix"
mv "$tmp/prefix" "$tmp/moved"
build_and_run "$tmp/moved"
# Without a server the app says so and exits 3.
set +e
"$tmp/app" 127.0.0.1 1 >"$tmp/none.out" 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || fail "app without a server: exit $rc, expected 3: $(cat "$tmp/none.out")"
echo "install_test: installed into a temporary prefix, compiled app.c with pkg-config ($(pkg-config --libs physd-client)), ran it and physctl against physd on port $port, moved the prefix and did it again"
