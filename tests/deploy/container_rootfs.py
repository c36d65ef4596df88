#!/usr/bin/python3
"""container_rootfs.py — the container recipe (deploy/container/Containerfile)
tested where no container engine runs: its steps are carried out into a root
directory, and physd is run from that directory with chroot, as the image's
user, in a network namespace of its own.

Usage: container_rootfs.py SOURCE_DIR WORK_DIR   (root; else exit 77: skipped)

The build stage: its apt packages must be installed here (the names are
checked with dpkg), then its RUN commands run verbatim except that /src,
/build and /staging point into SOURCE_DIR and WORK_DIR (a Release build and
`cmake --install` with DESTDIR, as in the recipe).

The runtime stage: the root directory holds the files of the packages its
apt-get line installs, with their Depends closure as apt would resolve it,
plus bookworm-slim's libc6, libc-bin and coreutils (from this machine's
Debian 12 packages: the same distribution as the image's base); then the
user and the volume directory of its RUN line, and the staging tree of
COPY --from=build. Checks:
  - the dynamic loader in the root resolves every library of physd, physctl
    and curl (ld.so --list: nothing "not found");
  - ENTRYPOINT + CMD run as USER in the root, in a new network namespace:
    with /dev/null, /dev/zero, /dev/random, /dev/urandom and /proc as an
    engine provides them: the HEALTHCHECK command (curl /healthz, from the
    root) succeeds within
    its start period, /readyz answers 200 (the libwebsockets event-loop
    plugin, which ldd does not list, is there), the EXPOSEd ports listen,
    the admin token is generated in the VOLUME with mode 0600 and the
    user's uid, physctl from the root pings over the protocol port with it,
    and SIGTERM ends physd with exit 0.
What this does not test: the Debian bookworm-slim image itself (its files
here come from this machine's packages), a container engine's isolation,
and the image build cache.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

BASE_PACKAGES = ["libc6", "libc-bin", "coreutils"]


def fail(msg):
    print("container_rootfs: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def parse(path):
    """Instructions of a Containerfile by stage: {stage: [(INSTR, args)]}."""
    text = open(path).read()
    lines, cur = [], ""
    for raw in text.splitlines():
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        lines.append(cur)
        cur = ""
    stages, name = {}, None
    for ln in lines:
        instr, _, args = ln.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", args, re.I)
            name = m.group(2) or m.group(1)
            stages[name] = [("FROM", m.group(1))]
        elif name:
            stages[name].append((instr, args.strip()))
    return stages


def apt_packages(cmd):
    m = re.search(r"apt-get install ((?:\s*-\S+)*)\s+(.*?)(?:&&|$)", cmd)
    return m.group(2).split() if m else []


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and "install ok installed" in r.stdout


def depends(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Pre-Depends}, ${Depends}", pkg], capture_output=True, text=True)
    out = []
    for group in r.stdout.split(","):
        group = group.strip()
        if not group:
            continue
        alts = [re.sub(r"\s*\(.*?\)", "", a).strip().split(":")[0] for a in group.split("|")]
        pick = next((a for a in alts if installed(a)), None)
        if pick is None:
            fail("%s depends on %s, none installed here" % (pkg, group))
        out.append(pick)
    return out


def closure(pkgs):
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        if not installed(p):
            fail("package %s is not installed here (misspelt in the Containerfile, or missing from setup.sh)" % p)
        seen.add(p)
        todo.extend(depends(p))
    return sorted(seen)


def copy_package(pkg, root):
    files = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True, check=True).stdout.split("\n")
    n = 0
    for f in files:
        if not f.startswith("/") or f.startswith("/usr/share/doc") or f.startswith("/usr/share/man"):
            continue
        if os.path.isdir(f) and not os.path.islink(f):
            continue
        if not os.path.lexists(f):
            continue
        real = os.path.join(os.path.realpath(os.path.dirname(f)), os.path.basename(f))
        dest = root + real
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.lexists(dest):
            continue
        if os.path.islink(f):
            os.symlink(os.readlink(f), dest)
        else:
            shutil.copy2(f, dest)
        n += 1
    return n


def sub_paths(cmd, src, work):
    for old, new in (("/src", src), ("/build", os.path.join(work, "build")),
                     ("/staging", os.path.join(work, "staging"))):
        cmd = re.sub(r"(?<![\w/.-])" + re.escape(old) + r"(?=[/\s\"']|$)", new, cmd)
    return cmd


def main():
    if sys.argv[1] == "--run":
        return run_checks(json.loads(sys.argv[2]))
    src, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if os.geteuid() != 0:
        print("container_rootfs: needs root (chroot, a network namespace): skipped")
        sys.exit(77)
    stages = parse(os.path.join(src, "deploy/container/Containerfile"))
    if list(stages) != ["build", "runtime"]:
        fail("expected the stages build and runtime, got %s" % list(stages))
    os.makedirs(work, exist_ok=True)

    # ------------------------------------------------------------ build
    t0 = time.time()
    staging = os.path.join(work, "staging")
    shutil.rmtree(staging, ignore_errors=True)
    for instr, args in stages["build"]:
        if instr == "RUN" and "apt-get" in args:
            pk = apt_packages(args)
            missing = [p for p in pk if not installed(p)]
            if not pk or missing:
                fail("build stage packages %s; not installed here: %s" % (pk, missing))
        elif instr == "RUN":
            cmd = sub_paths(args, src, work)
            r = subprocess.run(["bash", "-c", "set -e; " + cmd], capture_output=True, text=True)
            if r.returncode != 0:
                fail("build stage: %s\n%s%s" % (cmd, r.stdout[-3000:], r.stderr[-3000:]))
        elif instr == "COPY" and args.split() != [".", "/src"]:
            fail("build stage: unexpected COPY %s" % args)
    if not os.access(os.path.join(staging, "usr/bin/physd"), os.X_OK):
        fail("the build stage did not install /usr/bin/physd into /staging")
    print("build stage: Release build and install into /staging in %.0f s" % (time.time() - t0))

    # ---------------------------------------------------------- runtime
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for d in ("bin", "sbin", "lib", "lib64"):  # bookworm's merged /usr
        os.makedirs(os.path.join(root, "usr", d), exist_ok=True)
        os.symlink("usr/" + d, os.path.join(root, d))
    info = {"root": root}
    pkgs = []
    for instr, args in stages["runtime"]:
        if instr == "RUN" and "apt-get" in args:
            pkgs = apt_packages(args)
        elif instr == "RUN" and "useradd" in args:
            uid = int(re.search(r"useradd.*--uid (\d+)", args).group(1))
            gid = int(re.search(r"groupadd.*--gid (\d+)", args).group(1))
            name = args.split("useradd")[1].split("&&")[0].split()[-1]
            m = re.search(r"install -d -o (\S+) -g (\S+) -m (\d+) (\S+)", args)
            info.update(uid=uid, gid=gid, user=name, volume_dir=m.group(4), volume_mode=int(m.group(3), 8))
        elif instr == "COPY":
            if args.split() != ["--from=build", "/staging/", "/"]:
                fail("runtime stage: unexpected COPY %s" % args)
        elif instr == "USER":
            info["user_spec"] = args
        elif instr == "VOLUME":
            info["volume"] = json.loads(args)
        elif instr == "EXPOSE":
            info["expose"] = [int(p.split("/")[0]) for p in args.split()]
        elif instr == "HEALTHCHECK":
            info["healthcheck"] = json.loads(args.split(" CMD ", 1)[1])
            info["start_period"] = float(re.search(r"--start-period=(\d+)s", args).group(1))
        elif instr == "ENTRYPOINT":
            info["entrypoint"] = json.loads(args)
        elif instr == "CMD":
            info["cmd"] = json.loads(args)
    if not pkgs:
        fail("no apt-get install line in the runtime stage")
    all_pkgs = closure(pkgs + BASE_PACKAGES)
    nfiles = sum(copy_package(p, root) for p in all_pkgs)
    print("runtime stage: %d packages listed, %d with their dependencies and libc6/libc-bin/coreutils; %d files" %
          (len(pkgs), len(all_pkgs), nfiles))
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc/passwd"), "a") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n%s:x:%d:%d::%s:/usr/sbin/nologin\n" %
                (info["user"], info["uid"], info["gid"], info["volume_dir"]))
    with open(os.path.join(root, "etc/group"), "a") as f:
        f.write("root:x:0:\n%s:x:%d:\n" % (info["user"], info["gid"]))
    vol = root + info["volume_dir"]
    os.makedirs(vol, exist_ok=True)
    os.chown(vol, info["uid"], info["gid"])
    os.chmod(vol, info["volume_mode"])
    if info["volume"] != [info["volume_dir"]]:
        fail("VOLUME %s is not the user's directory %s" % (info["volume"], info["volume_dir"]))
    subprocess.run(["cp", "-a", staging + "/.", root + "/"], check=True)
    if os.path.exists(os.path.join(root, "etc/ld.so.conf")):
        subprocess.run(["ldconfig", "-r", root], check=True)
    # The dynamic loader of the root, on every executable the image runs.
    for exe in ("/usr/bin/physd", "/usr/bin/physctl", "/usr/bin/curl", "/usr/bin/install"):
        r = subprocess.run(["chroot", root, "/lib64/ld-linux-x86-64.so.2", "--list", exe], capture_output=True,
                           text=True)
        if r.returncode != 0 or "not found" in r.stdout:
            fail("in the root, %s: %s%s" % (exe, r.stdout, r.stderr))
        if exe == "/usr/bin/physd":
            print("ld.so --list /usr/bin/physd in the root: %d libraries, none missing" % len(r.stdout.splitlines()))
    info["bookkeeping"] = work
    r = subprocess.run(["unshare", "-n", "-m", "--propagation", "private", "/usr/bin/python3", os.path.abspath(__file__), "--run", json.dumps(info)])
    sys.exit(r.returncode)


def run_checks(info):
    """In a new network namespace: ENTRYPOINT + CMD as USER in the root."""
    root = info["root"]
    subprocess.run([shutil.which("ip") or "/usr/sbin/ip", "link", "set", "lo", "up"], check=True)
    # What a container engine provides: the basic devices and /proc (in a
    # mount namespace of this test's own, gone when it ends).
    dev = os.path.join(root, "dev")
    os.makedirs(dev, exist_ok=True)
    for name, minor in (("null", 3), ("zero", 5), ("random", 8), ("urandom", 9)):
        if not os.path.exists(os.path.join(dev, name)):
            os.mknod(os.path.join(dev, name), 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            os.chmod(os.path.join(dev, name), 0o666)
    os.makedirs(os.path.join(root, "proc"), exist_ok=True)
    os.makedirs(os.path.join(root, "tmp"), mode=0o1777, exist_ok=True)
    subprocess.run([shutil.which("mount") or "/usr/bin/mount", "-t", "proc", "proc", os.path.join(root, "proc")],
                   check=True)
    uid, gid = info["user_spec"].split(":")
    chroot = [shutil.which("chroot") or "/usr/sbin/chroot", "--userspec=%s:%s" % (uid, gid), root]
    log = open(os.path.join(info["bookkeeping"], "physd.log"), "w")
    env = {"PATH": "/usr/bin:/bin", "HOME": info["volume_dir"]}
    p = subprocess.Popen(chroot + info["entrypoint"] + info["cmd"], stdout=log, stderr=subprocess.STDOUT, env=env)
    t0 = time.time()
    ok = False
    while time.time() - t0 < info["start_period"]:
        if p.poll() is not None:
            break
        r = subprocess.run(chroot + info["healthcheck"], capture_output=True, text=True, env=env)
        if r.returncode == 0:
            ok = True
            break
        time.sleep(0.5)
    if not ok:
        p.kill()
        log.close()
        fail("HEALTHCHECK %s did not pass within %.0f s; physd log:\n%s" %
             (info["healthcheck"], info["start_period"], open(log.name).read()[-3000:]))
    print("HEALTHCHECK %s: exit 0 after %.1f s" % (" ".join(info["healthcheck"]), time.time() - t0))
    checks = []
    r = subprocess.run(chroot + ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                 "http://127.0.0.1:7448/readyz"], capture_output=True, text=True, env=env)
    if r.stdout != "200":
        fail("/readyz: %s %s" % (r.stdout, r.stderr))
    checks.append("/readyz 200")
    with open("/proc/net/tcp") as f:
        listening = {int(ln.split()[1].split(":")[1], 16) for ln in f.readlines()[1:] if ln.split()[3] == "0A"}
    if not set(info["expose"]) <= listening:
        fail("EXPOSEd ports %s; listening %s" % (info["expose"], sorted(listening)))
    checks.append("ports %s listen" % info["expose"])
    status = open("/proc/%d/status" % p.pid).read()
    puid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
    if puid != int(uid) or puid == 0:
        fail("physd runs as uid %d, not %s" % (puid, uid))
    checks.append("physd runs as uid %d" % puid)
    tok = root + info["volume_dir"] + "/admin.token"
    st = os.stat(tok)
    if st.st_uid != int(uid) or (st.st_mode & 0o777) != 0o600:
        fail("admin token %s: uid %d mode %o" % (tok, st.st_uid, st.st_mode & 0o777))
    checks.append("admin token in the volume (0600, uid %d)" % st.st_uid)
    token = open(tok).read().strip()
    env2 = dict(env, PHYSD_TOKEN=token)
    r = subprocess.run(chroot + ["/usr/bin/physctl", "--port", "7447", "create", "--scene", "stack20"],
                       capture_output=True, text=True, env=env2)
    if r.returncode != 0 or r.stdout.strip() != "1":
        fail("physctl create with the admin token: %s %s" % (r.stdout, r.stderr))
    if not os.path.exists(root + info["volume_dir"] + "/worlds/1.journal"):
        fail("no journal of world 1 in the volume")
    checks.append("physctl create -> world 1, journaled in the volume")
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    if rc != 0:
        fail("SIGTERM: exit %d" % rc)
    checks.append("SIGTERM: exit 0")
    print("; ".join(checks))
    print("container_rootfs: all checks passed (a root directory built from the Containerfile's steps; "
          "no container engine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
