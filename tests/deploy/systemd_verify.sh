#!/usr/bin/env bash
# systemd_verify.sh — the systemd unit as it is installed, checked by
# systemd itself: `cmake --install BUILD --prefix /usr` into a temporary
# root (DESTDIR), then
#   - systemd-analyze verify --root=ROOT of the installed unit (verify wants
#     ExecStart's binary to exist: it does, in ROOT/usr/bin);
#   - the unit's promises: Type=notify, WatchdogSec, DynamicUser, the
#     StateDirectory used as --data-dir, ProtectSystem=strict, the config
#     file /etc/physd/physd.conf installed and accepted by the installed
#     physd (--config FILE --version exits 0);
#   - systemd-analyze security --offline: the exposure level at most 2.0
#     (of 10; "OK").
# Usage: systemd_verify.sh BUILD_DIR. Exit 0 when all hold, 77 (skipped)
# without systemd-analyze, else 1 with the failing step on stderr.
set -euo pipefail
build=$1
command -v systemd-analyze >/dev/null || { echo "systemd_verify: no systemd-analyze: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/physd-systemd-verify.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "systemd_verify: $*" >&2; exit 1; }

root=$tmp/root
DESTDIR=$root cmake --install "$build" --prefix /usr >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
unit=$root/usr/lib/systemd/system/physd.service
conf=$root/etc/physd/physd.conf
[ -f "$unit" ] || fail "not installed: /usr/lib/systemd/system/physd.service"
[ -f "$conf" ] || fail "not installed: /etc/physd/physd.conf"
[ -x "$root/usr/bin/physd" ] || fail "not installed: /usr/bin/physd"

# The root is a system's: systemd's own units (the targets a unit's default
# dependencies name) from this machine's systemd package, beside physd's.
for f in /usr/lib/systemd/system/*; do
  [ -e "$root/usr/lib/systemd/system/$(basename "$f")" ] || cp -a "$f" "$root/usr/lib/systemd/system/"
done
systemd-analyze verify --root="$root" "$unit" >"$tmp/verify.log" 2>&1 || { cat "$tmp/verify.log" >&2; fail "systemd-analyze verify failed"; }
[ ! -s "$tmp/verify.log" ] || { cat "$tmp/verify.log" >&2; fail "systemd-analyze verify printed warnings"; }
echo "systemd-analyze verify --root: no error, no warning"

need() { grep -qxF "$1" "$unit" || fail "the unit lacks \"$1\""; }
need "Type=notify"
need "WatchdogSec=30"
need "DynamicUser=yes"
need "StateDirectory=physd"
need "ProtectSystem=strict"
need "NoNewPrivileges=yes"
need "PrivateTmp=yes"
need "ExecStart=/usr/bin/physd --config /etc/physd/physd.conf --data-dir /var/lib/physd"

"$root/usr/bin/physd" --config "$conf" --version >"$tmp/version.log" 2>&1 || { cat "$tmp/version.log" >&2; fail "the installed physd.conf is refused by physd"; }
echo "physd --config /etc/physd/physd.conf: accepted ($(cat "$tmp/version.log"))"

systemd-analyze security --offline=yes --root="$root" "$unit" >"$tmp/security.log" 2>&1 || true
level=$(sed -n 's/.*Overall exposure level for physd.service: \([0-9.]*\).*/\1/p' "$tmp/security.log")
[ -n "$level" ] || { cat "$tmp/security.log" >&2; fail "no exposure level from systemd-analyze security"; }
awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || { grep '✗' "$tmp/security.log" >&2; fail "exposure level $level > 2.0"; }
echo "systemd-analyze security --offline: exposure $level (of 10)"
echo "systemd_verify: all checks passed"
