"""Pooled grading containers (arex/grading/pool.py): a submission graded in a pooled container
can leave nothing behind that changes the next one's verdict.

Each attack below is graded in a pool of one container; then a victim submission, whose verdict
would change if anything of the attack survived, is graded in the same (cleaned) container, and
its verdict must equal the victim's verdict in a fresh container. Also: the check is not vacuous
(it reports what an attack leaves when nothing was cleaned), a container failing its check is
replaced, a tampered test file on the host stops grading, and selection's re-grading uses a
fresh container, never the pool.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from arex.envs.runtime import load_env
from arex.grading.judge import Judge
from arex.grading.pool import GradingPool
from arex.record.trajectory import RoundEnd
from arex.sandbox.base import RunLimits, SandboxConfig, SandboxError
from arex.sandbox.cleaning import INSPECT
from arex.specs import JudgeSpec

pytestmark = pytest.mark.docker

MARKERS = [
    "/workspace/left.txt",
    "/workspace/run/left.txt",
    "/tmp/left.txt",
    "/home/arex/left.txt",
    "/dev/shm/left.txt",
]
PLACES = ["/workspace", "/tmp", "/home/arex", "/dev/shm", "/dev/mqueue"]

# (a) files everywhere it can write, locked (chmod 000), deep, oddly named; and the answer left behind.
ATTACK_FILES = textwrap.dedent(f"""
    import ctypes, os
    a, b = map(int, input().split())
    for path in {MARKERS!r}:
        open(path, "w").write(str(a + b))
    for top in {PLACES[:4]!r}:
        if os.path.lexists(os.path.join(top, "locked")):
            continue  # the second test of the same grading
        d = os.path.join(top, "locked")
        os.makedirs(d + "/inner")
        open(d + "/inner/x\\nname", "w").write("x")
        os.chmod(d + "/inner", 0)
        os.chmod(d, 0)
        fd = os.open(top, os.O_RDONLY)
        for _ in range(300):  # deeper than PATH_MAX
            os.mkdir("d" * 200, dir_fd=fd)
            fd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
    open("/tmp/answer", "w").write(str(a + b) + "\\n")
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    rt.mq_open.restype = ctypes.c_int
    rt.mq_open(b"/arex-left", os.O_CREAT | os.O_RDWR, 0o600, None)
    for path in ("/etc/left", "/usr/left", "/var/tmp/left", "/left", "/.arex/left", "/.arex/arex-run"):
        try:
            open(path, "a").write("x")
        except OSError:
            pass
    print(a + b)
""")

# (b) processes: a double-forked setsid daemon ignoring SIGTERM/SIGHUP that keeps writing into the
# next run's folder and kills any other process of the user; a nohup'd sleeper.
ATTACK_PROCS = textwrap.dedent("""
    import os, signal, subprocess, time
    a, b = map(int, input().split())
    main = os.getpid()
    subprocess.Popen(["nohup", "sleep", "1000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(s, signal.SIG_IGN)
            os.closerange(0, 1024)
            me = os.getpid()
            while True:
                for path in ("/workspace/run/left.txt", "/tmp/answer"):
                    try:
                        open(path, "w").write("3\\n")
                    except OSError:
                        pass
                for pid in os.listdir("/proc"):
                    if pid.isdigit() and int(pid) not in (me, main):
                        try:
                            if os.stat("/proc/" + pid).st_uid == os.getuid() and b"sleep" not in open("/proc/" + pid + "/cmdline", "rb").read():
                                os.kill(int(pid), signal.SIGKILL)
                        except OSError:
                            pass
                time.sleep(0.01)
        os._exit(0)
    print(a + b)
""")  # noqa: E501

# (c) SysV shared memory, semaphores and a message queue; a FIFO and a unix socket in /tmp.
ATTACK_IPC = textwrap.dedent("""
    import ctypes, os, socket
    a, b = map(int, input().split())
    libc = ctypes.CDLL(None, use_errno=True)
    for key in (0x4152, 0x4153):
        libc.shmget(key, 4096, 0o1000 | 0o666)
        libc.semget(key, 1, 0o1000 | 0o666)
        libc.msgget(key, 0o1000 | 0o666)
    if not os.path.lexists("/tmp/fifo"):  # else the second test of the same grading
        os.mkfifo("/tmp/fifo")
        s = socket.socket(socket.AF_UNIX)
        s.bind("/tmp/sock")
        s.listen()
    print(a + b)
""")

# The victim prints the right answer only if nothing of an earlier submission is there.
VICTIM_CLEAN = textwrap.dedent(f"""
    import os
    a, b = map(int, input().split())
    mine = {{os.getpid(), os.getppid()}}
    found = [p for p in {MARKERS!r} + ["/tmp/answer", "/tmp/fifo", "/tmp/sock"] if os.path.lexists(p)]
    found += [top + "/" + n for top in {PLACES!r} for n in os.listdir(top) if top != "/workspace" or n != "run"]
    found += [n for n in os.listdir("/workspace/run") if n != "solution.py"]
    for kind in ("shm", "sem", "msg"):
        found += open("/proc/sysvipc/" + kind).read().splitlines()[1:]
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) not in mine and os.stat("/proc/" + pid).st_uid != 0:
            found.append("process " + pid)
    print(a + b if not found else "dirty: " + repr(found[:3]))
""")
# The victim that a leftover answer would help: it only repeats what it finds.
VICTIM_HELPED = 'import os\nprint(open("/tmp/answer").read() if os.path.exists("/tmp/answer") else "0")\n'


def _spec(checker: dict | None = None) -> JudgeSpec:
    return JudgeSpec(
        id="pooled", title="pooled", time_limit_s=2.0, starter="solution.py", checker=checker or {"kind": "token"},
        tests=[{"name": "s1", "input": "tests/s1.in", "answer": "tests/s1.ans", "sample": True},
               {"name": "h1", "input": "tests/h1.in", "answer": "tests/h1.ans"}],
    )  # fmt: skip


def _env_dir(root: Path, checker: bool = False) -> Path:
    (root / "private" / "tests").mkdir(parents=True)
    for name in ("s1", "h1"):
        (root / "private" / "tests" / f"{name}.in").write_text("1 2\n")
        (root / "private" / "tests" / f"{name}.ans").write_text("3\n")
    if checker:
        (root / "private" / "check.py").write_text(
            "import sys\n"
            "out, ans = open(sys.argv[2]).read().split(), open(sys.argv[3]).read().split()\n"
            "sys.exit(0 if out == ans else 1)\n"
        )
    return root


@pytest.fixture(scope="module")
def judge(tmp_path_factory) -> Judge:
    return Judge(_env_dir(tmp_path_factory.mktemp("pooled")), _spec())


@pytest.fixture(scope="module")
def pool(judge):
    pool = GradingPool(judge, cap=1)
    yield pool
    pool.close()


def _verdicts(result) -> list[str]:
    return [t["verdict"] for t in result.details["tests"]]


def _pooled(pool: GradingPool, source: str):
    """Grade `source` in a lease of `pool`; (its verdicts, the container's id)."""
    with pool.lease() as lease:
        result = pool.judge.grade(source, "python3", box=lease.box, checker_box=lease.checker)
        assert result.infra_error is None, result.infra_error
        return _verdicts(result), lease.box.id


@pytest.fixture(scope="module")
def fresh(judge) -> dict[str, list[str]]:
    """The victims' verdicts in fresh containers."""
    return {
        name: _verdicts(judge.grade(src, "python3"))
        for name, src in (("clean", VICTIM_CLEAN), ("helped", VICTIM_HELPED))
    }


def test_victims_in_fresh_containers(fresh):
    assert fresh == {"clean": ["AC", "AC"], "helped": ["WA", "WA"]}


@pytest.mark.parametrize("attack", [ATTACK_FILES, ATTACK_PROCS, ATTACK_IPC], ids=["files", "processes", "ipc"])
def test_nothing_of_an_attack_reaches_the_next_grading(pool, fresh, attack):
    verdicts, attacked = _pooled(pool, attack)
    assert verdicts == ["AC", "AC"]
    clean, box = _pooled(pool, VICTIM_CLEAN)
    assert box == attacked, "the victim ran in another container: the pool was not reused"
    assert clean == fresh["clean"]
    _, attacked = _pooled(pool, attack)
    helped, box = _pooled(pool, VICTIM_HELPED)
    assert box == attacked and helped == fresh["helped"]
    assert pool.replaced == 0, pool.failures  # every attack was cleaned up, none left the container unusable


def test_the_check_sees_what_an_attack_leaves(pool):
    """Without the cleaning (an attack's leftovers, processes still running), INSPECT as the agent
    would see it reports them: the pool's check is not vacuous."""
    with pool.lease() as lease:
        box = lease.box
        box.exec(["python3", "-c", ATTACK_IPC], stdin="1 2\n", cwd="/tmp", timeout=30, limits=RunLimits(isolated=True))
        daemon = (
            "setsid nohup sleep 1000 >/dev/null 2>&1 &"
            " python3 -c 'import os, time; os.fork() or (os.setsid(), time.sleep(1000))' >/dev/null 2>&1 &"
        )
        box.exec(["bash", "-c", daemon], timeout=30)  # not isolated: they live on
        box.exec(["bash", "-c", "chmod 000 /tmp/fifo; mkdir -p /dev/shm/x && chmod 0 /dev/shm/x"])
        seen = box.exec(
            [
                "python3",
                "-I",
                "-S",
                "-c",
                INSPECT.replace('subprocess.run(["ipcrm"', 'None and subprocess.run(["ipcrm"').replace(
                    '["rm", "-rf"', '["true"'
                ),
                "[]",
                "[]",
                "{}",
            ],
            cwd="/",
        )
        report = json.loads(seen.stdout)
        assert any("sleep" in p for p in report["procs"]) and any("python3" in p for p in report["procs"]), report[
            "procs"
        ]
        assert len(report["ipc"]) >= 6 and {"/tmp/fifo", "/tmp/sock", "/dev/shm/x"} <= set(report["left"]), report
    assert _pooled(pool, VICTIM_CLEAN)[0] == ["AC", "AC"]
    assert pool.replaced == 0, pool.failures


def test_a_container_failing_its_check_is_replaced(tmp_path):
    """The checker container's compiled checker is re-hashed before each use: changed (here by a
    command as the sandbox user, as a checker run could), the container is removed, not reused."""
    judge = Judge(_env_dir(tmp_path, checker=True), _spec({"kind": "testlib", "source": "check.py"}))
    pool = GradingPool(judge, cap=1)
    try:
        with pool.lease() as lease:
            first = (lease.box.id, lease.checker.id)
            assert _verdicts(judge.grade(VICTIM_CLEAN, "python3", box=lease.box, checker_box=lease.checker)) == [
                "AC",
                "AC",
            ]
            lease.checker.write_file("checker", "#!/bin/sh\nexit 0\n", mode=0o755)
        with pool.lease() as lease:
            assert (lease.box.id, lease.checker.id) != first and lease.checker.id != first[1]
            assert _verdicts(judge.grade(VICTIM_HELPED, "python3", box=lease.box, checker_box=lease.checker)) == [
                "WA",
                "WA",
            ]
        assert pool.replaced == 1 and "checker box: /workspace/checker changed" in pool.failures[0], pool.failures
    finally:
        pool.close()


def test_a_test_file_changed_on_disk_stops_grading(tmp_path):
    judge = Judge(_env_dir(tmp_path), _spec())
    pool = GradingPool(judge, cap=1)
    try:
        with pool.lease():  # the first lease pins the tests' files
            pass
        (tmp_path / "private" / "tests" / "h1.in").write_text("1 1\n")
        with pool.lease() as lease, pytest.raises(SandboxError, match="h1.in changed on disk"):
            judge.grade(VICTIM_CLEAN, "python3", box=lease.box)
    finally:
        pool.close()


def test_regrade_uses_a_fresh_container_not_the_pool(tmp_path, monkeypatch):
    root = _env_dir(tmp_path / "pooled")
    (root / "workspace").mkdir()
    (root / "statement.md").write_text("Print a + b.\n")
    (root / "task.yaml").write_text(json.dumps(_spec().model_dump(mode="json")))
    env = load_env(root)
    opened = []
    real_open = Judge.open_box
    monkeypatch.setattr(Judge, "open_box", lambda self: opened.append(1) or real_open(self))
    monkeypatch.setattr(GradingPool, "lease", lambda self: pytest.fail("regrade drew from a grading pool"))
    archive = tmp_path / "round.tar"
    data = VICTIM_CLEAN.encode()
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("solution.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    result = env.regrade(archive, RoundEnd.model_construct(submission=VICTIM_CLEAN), SandboxConfig())
    assert _verdicts(result) == ["AC", "AC"] and opened == [1]


def test_a_batch_shares_one_grading_container_and_starts_sandboxes_ahead(tmp_path, monkeypatch):
    """Three rollouts one at a time: one grading container serves all three, each rollout gets its
    own agent sandbox (started ahead while it waited), none is started for a finished record, and
    nothing is left after the batch."""
    from arex.envs.build import build_envs
    from arex.rollout.batch import run_batch
    from arex.rollout.config import RolloutConfig
    from arex.sandbox.docker import DockerSandbox, docker_client
    from arex.teacher.client import TeacherConfig
    from arex.teacher.scripted import RoundScript, ScriptedServer

    src = tmp_path / "src" / "pooled"
    _env_dir(src)
    (src / "solutions").mkdir()
    (src / "solutions" / "ok.py").write_text("a, b = map(int, input().split())\nprint(a + b)\n")
    (src / "workspace").mkdir()
    (src / "workspace" / "solution.py").write_text("print(0)\n")
    (src / "statement.md").write_text("Print a + b.\n")
    (src / "task.yaml").write_text(
        "id: pooled\ntitle: pooled\ntime_limit_s: 2.0\nstarter: solution.py\n"
        "solutions:\n  - {path: solutions/ok.py, expected: accepted}\n"
    )
    [report] = build_envs([src], tmp_path / "envs")
    assert report.status == "accepted", report.reason
    env = load_env(tmp_path / "envs" / "pooled")
    started: list[str] = []
    real_start = DockerSandbox.start
    # a start, not a no-op
    monkeypatch.setattr(
        DockerSandbox, "start", lambda self: (self.id is None and started.append(self.name)) or real_start(self)
    )
    teacher = TeacherConfig(model="scripted-teacher", track_cost=False)
    ours = {"label": f"arex.owner_pid={os.getpid()}"}
    before = {c.id for c in docker_client().containers.list(all=True, filters=ours)}  # the module's pool
    for _ in range(2):  # the second run finds every record finished
        started.clear()
        with ScriptedServer(
            RoundScript(lambda n: ["cat solution.py"]), model="scripted-teacher", latency_s=0.2
        ) as server:
            summary = asyncio.run(
                run_batch(
                    [env], teacher, RolloutConfig(rounds=2), SandboxConfig(), tmp_path / "store", 3, 1, server.base_url
                )
            )
        assert summary["endings"] == {"done": 3}
        left = [c.name for c in docker_client().containers.list(all=True, filters=ours) if c.id not in before]
        assert left == []
        if _ == 0:
            assert sorted(started) == ["judge-pooled", "rollout-pooled-0", "rollout-pooled-1", "rollout-pooled-2"], (
                started
            )
    assert [n for n in started if n.startswith("rollout-")] == []


def test_a_result_is_shared_only_after_two_gradings_of_it_agree(pool):
    """grade_once: a submission's result stands for later requests (other rollouts') only once two
    real gradings of it agreed. A nondeterministic one (here: its draws pass, then fail) is graded
    for every request, so its one lucky draw never stands for the rest."""
    graded: list[str] = []

    def grading(draws):
        def grade():
            source = draws[min(len(graded), len(draws) - 1)]
            graded.append(source)
            return pool.grade(
                lambda lease: pool.judge.grade(source, "python3", box=lease.box, checker_box=lease.checker)
            )

        return grade

    flaky = grading([VICTIM_CLEAN, "print(0)", VICTIM_CLEAN])
    outcomes = [pool.grade_once("flaky", flaky) for _ in range(3)]
    assert [(_verdicts(r), cached) for r, cached in outcomes] == [
        (["AC", "AC"], False),
        (["WA", "WA"], False),
        (["AC", "AC"], False),
    ]
    assert len(graded) == 3  # every request graded: the two draws disagreed

    graded.clear()
    steady = grading([VICTIM_CLEAN])
    outcomes = [pool.grade_once("steady", steady) for _ in range(3)]
    assert [cached for _, cached in outcomes] == [False, False, True] and len(graded) == 2
    assert all(_verdicts(r) == ["AC", "AC"] for r, _ in outcomes)
