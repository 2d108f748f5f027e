"""Making a used sandbox as clean as a fresh one, and checking it is, before it is reused.

A grading container is reused for the next grading (arex/grading/pool.py), possibly another
rollout's: anything a submission leaves in it is a channel to that grading. `clean(box, ...)`
runs one isolated command as the sandbox user (`INSPECT`; nothing of the user is alive before it
starts) that
- puts each expected place (the workdir, home, /tmp, /dev/shm, /dev/mqueue: `expected_places`)
  back to its original mode and strips its extended attributes, where the user owns it (a
  submission may chmod its own tmpfs roots 0555 to keep files out of an unprivileged cleaner's
  reach, or tag them with a `user.*` attribute that survives an emptying);
- empties every folder the user can write under every read-write mount (made writable first: a
  submission may chmod what it leaves), removes SysV IPC objects;
- then reports: what is left, every writable place, every expected place's owner, mode,
  attributes, entries and the pages and inodes its filesystem still holds, IPC objects, live
  processes of any uid but root, and the sha256 of the files the caller names.
`problems(report, ...)` judges the report on the host: a used sandbox is clean when every expected
place is an empty folder with its original owner and mode, no attributes, and its filesystem back
to the pages and inodes of a fresh one (tmpfs pages count against the next program's memory
limit: 240 MB left behind made an honest program MLE), nothing else is writable, no IPC object or
process is left, and every hashed file has its expected hash.
"""

from __future__ import annotations

import json

from arex.sandbox.base import RunLimits, Sandbox, SandboxConfig

INSPECT_TIMEOUT_S = 120.0
SHARED = ("/dev/shm", "/dev/mqueue")
"""Expected places the engine makes (root's, mode 1777), beside the config's own tmpfs."""

# argv: the paths to keep (absolute), the paths to hash, the expected places (path → [uid, gid, mode]).
INSPECT = r"""
import hashlib, json, os, re, stat, subprocess, sys
keep, hashed, expected = set(json.loads(sys.argv[1])), json.loads(sys.argv[2]), json.loads(sys.argv[3])
PSEUDO = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "securityfs", "debugfs", "tracefs", "bpf", "pstore",
          "configfs", "fusectl", "binfmt_misc", "nsfs"}
unescape = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)
mounts = []
for line in open("/proc/self/mountinfo"):
    head, _, tail = line.partition(" - ")
    f, (fstype, _src, sopts) = head.split(), tail.split()[:3]
    mounts.append((unescape(f[4]), fstype, "ro" in f[5].split(",") or "ro" in sopts.split(",")))
report = {"root_ro": [ro for p, t, ro in mounts if p == "/"][-1:] == [True],
          "writable": [], "left": [], "ipc": [], "procs": [], "hashes": {}, "places": {}}
tops = sorted({p for p, t, ro in mounts if not ro and t not in PSEUDO})
can_write = lambda p, st: os.access(p, (os.W_OK | os.X_OK) if stat.S_ISDIR(st.st_mode) else os.W_OK)
def restore(path, mode):
    # its own roots only: the user cannot chmod another's, nor set attributes on them
    try:
        st = os.lstat(path)
        if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode):
            return
        os.chmod(path, mode)
        for name in os.listxattr(path, follow_symlinks=False):
            os.removexattr(path, name, follow_symlinks=False)
    except OSError:
        pass
def places(top):
    # (folder the user can write, its entries) under a read-write mount, on that mount only;
    # folders it cannot write are searched deeper, files it can write are reported
    st = os.lstat(top)
    if not stat.S_ISDIR(st.st_mode):  # a file mounted on its own (/etc/hosts; /dev/null over a masked /proc file)
        if stat.S_ISREG(st.st_mode) and can_write(top, st):
            report["writable"].append(top)
        return
    dev, stack = st.st_dev, [top]
    while stack:
        d = stack.pop()
        try:
            names = [os.path.join(d, n) for n in os.listdir(d)]
        except OSError:
            names = []
        if can_write(d, os.lstat(d)):
            yield d, [p for p in names if p not in keep and p not in tops]
            continue
        for p in names:
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if st.st_dev != dev or p in tops:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(p)
            elif stat.S_ISREG(st.st_mode) and can_write(p, st) and p not in keep:
                report["writable"].append(p)
def state(path):
    try:
        st, fs = os.lstat(path), os.statvfs(path)
        return {"uid": st.st_uid, "gid": st.st_gid, "mode": stat.S_IMODE(st.st_mode), "dir": stat.S_ISDIR(st.st_mode),
                "xattrs": os.listxattr(path, follow_symlinks=False),
                "entries": len([n for n in os.listdir(path) if os.path.join(path, n) not in keep]),
                "blocks": fs.f_blocks - fs.f_bfree, "inodes": fs.f_files - fs.f_ffree}
    except OSError as exc:
        return {"error": exc.strerror or str(exc)}
for path, (_uid, _gid, mode) in expected.items():
    restore(path, mode)
for top in tops:
    for d, names in list(places(top)):
        if names:  # made writable first: a submission may chmod what it leaves; rm copes with any depth
            subprocess.run(["chmod", "-R", "u+rwX", "--", *names], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(["rm", "-rf", "--", *names], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.run(["ipcrm", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
report["writable"] = []
for top in tops:
    for d, names in places(top):
        report["writable"].append(d)
        report["left"] += names
report["places"] = {path: state(path) for path in expected}
for kind in ("shm", "sem", "msg"):
    try:
        rows = open("/proc/sysvipc/" + kind).read().splitlines()[1:]
        report["ipc"] += [kind + ": " + " ".join(x.split()) for x in rows if x.strip()]
    except OSError:
        pass
try:
    hashed += [os.path.join("/.arex", n) for n in os.listdir("/.arex")]
except OSError:
    pass
for path in hashed:
    try:
        with open(path, "rb") as fh:
            report["hashes"][path] = hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        report["hashes"][path] = "unreadable: " + str(exc.strerror)
me = os.getpid()
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != me:
        try:
            uid = os.stat("/proc/" + name).st_uid
            comm = open("/proc/" + name + "/comm").read().strip() if uid else ""
        except OSError:
            continue
        if uid != 0:
            report["procs"].append(name + " uid " + str(uid) + " " + comm)
print(json.dumps(report))
"""


def expected_places(config: SandboxConfig) -> dict[str, tuple[int, int, int]]:
    """The places a sandbox of `config` may write, each with its owner and mode when fresh
    (what arex.sandbox.docker creates: the user's tmpfs, the engine's shared memory folders)."""
    uid, gid = config.uid_gid
    own = {config.workdir: (uid, gid, 0o755), config.home: (uid, gid, 0o755), "/tmp": (uid, gid, 0o1777)}
    return {**own, **{path: (0, 0, 0o1777) for path in SHARED}}


def inspect(box: Sandbox, keep: list[str], hashed: list[str], script: str | None = None) -> dict | str:
    """Clean `box` and report its state (the INSPECT report, or `script`'s), or why that failed (a sentence)."""
    script = script or INSPECT  # read at each call: the mutation check replaces it
    places = {path: list(owner) for path, owner in expected_places(box.config).items()}
    argv = ["python3", "-I", "-S", "-c", script, *map(json.dumps, (sorted(keep), sorted(hashed), places))]
    r = box.exec(argv, timeout=INSPECT_TIMEOUT_S, cwd="/", limits=RunLimits(isolated=True))
    if not r.ok:
        return f"the cleaning command failed ({r.status}, exit {r.exit_code}): {r.stderr[-300:]}"
    try:
        return json.loads(r.stdout)
    except ValueError:
        return f"the cleaning command's report is not JSON: {r.stdout[:200]!r}"


def problems(report: dict, config: SandboxConfig, fresh: dict[str, dict] | None = None) -> list[str]:
    """What is wrong in an INSPECT report (hashes aside: the caller knows what they must be).
    `fresh`: the places' state in a fresh sandbox, whose pages and inodes in use are the baseline."""
    found = []
    if not report.get("root_ro"):
        found.append("the root filesystem is not read-only")
    expected = expected_places(config)
    extra = sorted(set(report["writable"]) - set(expected))
    if extra:
        found.append(f"writable beyond the expected places: {extra[:5]}")
    for key, what in (
        ("left", "left after wiping"),
        ("ipc", "SysV IPC objects left"),
        ("procs", "processes alive after the sweep"),
    ):
        if report[key]:
            found.append(f"{what}: {report[key][:5]}")
    for path, (uid, gid, mode) in expected.items():
        found += _place_problems(
            path, report["places"].get(path) or {"error": "not reported"}, (uid, gid, mode), (fresh or {}).get(path)
        )
    return found


def _place_problems(path: str, seen: dict, owner: tuple[int, int, int], fresh: dict | None) -> list[str]:
    if "error" in seen:
        return [f"{path}: {seen['error']}"]
    uid, gid, mode = owner
    found = []
    if not seen["dir"] or (seen["uid"], seen["gid"], seen["mode"]) != (uid, gid, mode):
        found.append(
            f"{path} is not the fresh folder: owner {seen['uid']}:{seen['gid']} mode {oct(seen['mode'])}"
            f" (want {uid}:{gid} {oct(mode)})"
        )
    if seen["xattrs"]:
        found.append(f"{path} carries extended attributes {seen['xattrs'][:5]}")
    if seen["entries"]:
        found.append(f"{path} holds {seen['entries']} entries after wiping")
    baseline = (fresh["blocks"], fresh["inodes"]) if fresh and "error" not in fresh else None
    if baseline is not None and (seen["blocks"], seen["inodes"]) != baseline:
        found.append(
            f"{path}'s filesystem holds {seen['blocks']} blocks and {seen['inodes']} inodes,"
            f" a fresh one {baseline[0]} and {baseline[1]}"
        )
    return found
