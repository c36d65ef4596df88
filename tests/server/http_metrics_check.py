"""http_metrics_check.py — /metrics of a live physd under a short physload run.

Starts physd (ephemeral protocol and HTTP ports), scrapes /metrics, runs
physload for 3 s (6 clients, 2 worlds, edits and queries), scrapes again,
and checks:
- both scrapes pass `promtool check metrics` (Debian's prometheus package);
- the counters moved as the load says: requests by type (a hello per
  client, exactly physload's edits and body queries, every request it
  sent), frames in (one per request) and out (replies and at least the
  pushes physload received), edit ops applied, bytes both ways, TCP connections,
  the worlds' ticks, and every world's step-time histogram counts its ticks
  (_count == ticks, buckets cumulative, +Inf == _count);
- no errors or limit hits for a well-behaved load.
Exits 77 (ctest: skipped) only when promtool is missing.

Usage: http_metrics_check.py PHYSD_BIN PHYSLOAD_BIN WORK_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

physd_bin, physload_bin, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
promtool = shutil.which("promtool")
if not promtool:
    print("promtool not found (Debian's prometheus package, deploy/setup.sh): skipped")
    sys.exit(77)

proc = subprocess.Popen([physd_bin, "--port", "0", "--http-port", "0", "--no-demo", "--workers", "2"],
                        stderr=subprocess.PIPE, text=True)
log = []
threading.Thread(target=lambda: [log.append(line) for line in proc.stderr], daemon=True).start()


def wait_log(pattern, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = re.search(pattern, "".join(log))
        if m:
            return m
        time.sleep(0.05)
    return None


def scrape(name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
        text = r.read().decode()
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    with open(path) as f:
        p = subprocess.run([promtool, "check", "metrics"], stdin=f, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("promtool check metrics failed on %s:\n%s%s" % (path, p.stdout, p.stderr))
    print("python: %s: %d lines, promtool check metrics ok" % (name, text.count("\n")))
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        key, value = line.rsplit(" ", 1)
        samples[key] = float(value)
    return samples


def v(s, key):
    return s.get(key, 0.0)


rc = None
try:
    m1 = wait_log(r"HTTP on http://127\.0\.0\.1:(\d+)/")
    m2 = wait_log(r"listening on 127\.0\.0\.1:(\d+)")
    if not m1 or not m2:
        sys.exit("physd did not start with HTTP:\n" + "".join(log))
    http_port, tcp_port = int(m1.group(1)), int(m2.group(1))
    before = scrape("metrics_before.txt")
    p = subprocess.run([physload_bin, "--port", str(tcp_port), "--clients", "6", "--duration", "3", "--ramp", "0.5",
                        "--worlds", "2", "--edit-rate", "5", "--query-rate", "5", "--keep", "--json", "--quiet"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit("physload exit %d:\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
    rep = json.loads(p.stdout)
    after = scrape("metrics_after.txt")

    def delta(key):
        return v(after, key) - v(before, key)

    sent = rep["requests"]["sent"]
    req_sum = sum(val - v(before, k) for k, val in after.items() if k.startswith("physd_requests_total{"))
    print("python: physload sent %d requests (%d with hellos and setup); physd counted %d" %
          (sent, rep["requests"]["all_sent"] + 6, req_sum))
    assert delta('physd_requests_total{request="hello"}') >= 6
    assert delta('physd_requests_total{request="create_world"}') >= 2
    assert delta('physd_requests_total{request="subscribe"}') >= 1
    assert delta('physd_requests_total{request="edit"}') >= 5
    # Exactly what physload says it sent: its edits and body queries, and
    # every request (all_sent leaves out the hellos, one per client).
    assert delta('physd_requests_total{request="edit"}') == rep["requests"]["edits"], rep["requests"]
    assert delta('physd_requests_total{request="query_bodies"}') == rep["requests"]["queries"], rep["requests"]
    assert delta('physd_requests_total{request="hello"}') == 6
    assert req_sum == rep["requests"]["all_sent"] + 6, (req_sum, rep["requests"])
    assert delta("physd_received_frames_total") == req_sum
    # Every request answered, plus the pushes physload received (a few more
    # may be on the way when it stops counting).
    assert delta("physd_sent_frames_total") >= req_sum + rep["frames"]["received"], rep["frames"]
    ops = sum(val - v(before, k) for k, val in after.items() if k.startswith("physd_world_edits_applied_total{"))
    assert ops == rep["requests"]["edits"], (ops, rep["requests"])  # one op a batch, every batch applied
    pushes = sum(val - v(before, k) for k, val in after.items() if k.startswith("physd_world_pushes_total{"))
    assert pushes >= rep["frames"]["received"], (pushes, rep["frames"])
    assert delta("physd_received_bytes_total") > 0 and delta("physd_sent_bytes_total") > 0
    assert delta('physd_connections_total{kind="tcp"}') >= 6
    assert v(after, "physd_worlds") >= 2
    assert sum(val for k, val in after.items() if k.startswith("physd_errors_total{")) == 0, "errors counted"
    assert sum(val for k, val in after.items() if k.startswith("physd_limit_hits_total{")) == 0, "limit hits"
    worlds = [k[len("physd_world_ticks_total"):] for k in after if k.startswith("physd_world_ticks_total{")]
    assert len(worlds) >= 2, worlds
    for lab in worlds:
        ticks = after["physd_world_ticks_total" + lab]
        assert ticks > 60, (lab, ticks)  # about 3 s at 60 Hz
        # The histogram counts every step; the samples of the scrape agree.
        assert after["physd_world_step_seconds_count" + lab] == ticks, lab
        inner = lab[1:-1]
        buckets = [val for k, val in after.items()
                   if k.startswith("physd_world_step_seconds_bucket{" + inner + ",le=")]
        assert buckets == sorted(buckets) and buckets[-1] == ticks, (lab, buckets)
        assert after["physd_world_step_seconds_sum" + lab] > 0
        assert "physd_world_solver_iterations" + lab in after, lab
    print("python: %d worlds ticking, %d edits, %d frames out; counters moved as expected" %
          (len(worlds), delta('physd_requests_total{request="edit"}'), delta("physd_sent_frames_total")))
finally:
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = -1
if rc != 0:
    sys.exit("physd exited with %d:\n%s" % (rc, "".join(log)[-3000:]))
print("python: /metrics checks ok")
