#!/bin/sh
# gen_journal_corpus.sh BUILD_DIR OUT_DIR — writes the journal target's seeds
# (docs/fuzzing.md, "The journal target"): real journals of a physd started
# with --data-dir and driven by physctl, one per kind of record (create with
# a preset and a scene, edits, settings, pause and resume, step requests,
# tokens made and revoked, a reset, a history window, a restored world's
# image, a rotation's image with its .prev). Run by hand after a change of
# the journal's records; the files are committed.
set -eu
build=$(cd "$1" && pwd)
out=$2
physd=$build/server/physd
ctl=$build/clients/physctl
tmp=$(mktemp -d)
pid=
stop() {
    if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    pid=
}
trap 'stop; rm -rf "$tmp"' EXIT

# Starts physd on data directory $1 with more options; sets $port. (Its
# max_step_work is the fuzz server's, so the journaled settings pass it.)
start() {
    data=$1
    shift
    "$physd" --port 0 --http 0 --no-demo --fsync always --journal-hash-every 5 --max-step-work 200000 \
        --data-dir "$data" "$@" 2> "$tmp/log" &
    pid=$!
    port=
    for _ in $(seq 200); do
        port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { cat "$tmp/log"; exit 1; }
}
c() { "$ctl" --port "$port" "$@"; }

start "$tmp/a"
# 1: a preset world, paused, edited, its settings changed, stepped, paused
#    and resumed, tokens made and one revoked, reset, stepped again.
w=$(c create --scene box_on_plane --name edits --paused)
c step "$w" 3 > /dev/null
b=$(c add "$w" shape=box half=0.25 pos=0,0,3)
c add "$w" shape=capsule radius=0.2 half_height=0.4 pos=1,0,2 > /dev/null
c set "$w" iterations=20 substeps=2 > /dev/null
c step "$w" 4 > /dev/null
c velocity "$w" "$b" vel=1,0,0 > /dev/null
c impulse "$w" "$b" 0,0,2 > /dev/null
c resume "$w" > /dev/null
sleep 0.2
c pause "$w" > /dev/null
c token create "$w" --role viewer --token-out "$tmp/t1" > "$tmp/t1.id"
c token create "$w" --role editor --label seed --token-out "$tmp/t2" > /dev/null
c token revoke "$w" "$(tr -dc 0-9a-f < "$tmp/t1.id" | head -c 16)" > /dev/null
c remove "$w" "$b" > /dev/null
c reset "$w" > /dev/null
c step "$w" 2 > /dev/null
# 2: joints and a history window.
w2=$(c create --scene chain30 --name chain --paused --history 16)
c step "$w2" 6 > /dev/null
c set "$w2" tick_rate=30 > /dev/null
c step "$w2" 2 > /dev/null
# 3: a world restored from a snapshot (its journal starts with the image).
w3=$(c create --scene stack20 --paused)
c step "$w3" 5 > /dev/null
c snapshot "$w3" "$tmp/s.bin" > /dev/null
c restore "$tmp/s.bin" --name restored --paused > /dev/null
c destroy "$w3" > /dev/null
# 4: a running world (state hash records every 5 ticks).
c create --scene three_sphere --name running > /dev/null
sleep 0.3
stop
mkdir -p "$out"
n=0
for f in "$tmp"/a/worlds/*.journal; do
    n=$((n + 1))
    cp "$f" "$out/journal_$n.bin"
done

# 5: a rotated journal (settings changes past 8192 bytes): its first record
#    is the world's image, .prev the journal before it.
start "$tmp/b" --journal-max-bytes 8192
w=$(c create --scene box_on_plane --name rotated --paused)
c add "$w" pos=0,1,2 > /dev/null
for i in $(seq 80); do
    c set "$w" iterations=$((10 + i)) > /dev/null
done
c step "$w" 1 > /dev/null
c add "$w" pos=1,1,2 > /dev/null
c step "$w" 2 > /dev/null
stop
for f in "$tmp"/b/worlds/*.journal "$tmp"/b/worlds/*.journal.prev; do
    n=$((n + 1))
    cp "$f" "$out/journal_$n.bin"
done
ls -l "$out"
