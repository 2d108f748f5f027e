"""Judge overhead: grading 200 tests of a C++ and of a Python solution in arex vs running the same
programs natively on the host, side by side in one run.

Run: python bench/judge_overhead.py   (B_N=50 B_ROUNDS=1 for a quicker look; B_PROFILE=1 adds a breakdown)
arex:   Judge.grade in a lease of a GradingPool of one container, reused across gradings (the
        production path): compile, the memory limit, the tests pipelined (one request runs them all
        through the runner, each run isolated, its input on stdin from the host, results streamed
        back), the token checker, then the pool's cleaning and check of the container (run in the
        background after the grading: waited for, and its CPU counted).
native: the same source compiled on the host with the same flags (python3 as is), then run once per
        test by subprocess over the same inputs, each output checked by the same checker.
Both include their compile step. Wall seconds decide; CPU seconds are shown beside them: the host
process's own, its children's (native), and the grading container's (its cgroup: server, runner,
program), plus the container's containerd shim (it relays the command stream).
Each side runs 3 times, alternating, and keeps its fastest round: other load on a shared host
only ever slows a side down. ratio = arex wall / native wall; cpu_ratio = arex CPU (host, box,
shim) / native CPU, the figure to read on a busy host; per_test_ms = arex wall per test.
Target on a quiet machine (issue 29): C++ ratio <= 1.25, overall ratio <= 1.15.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import cgroup_cpu, proc_cpu  # noqa: E402

from arex.envs.judge_build import load_spec  # noqa: E402
from arex.grading.checkers import check_builtin  # noqa: E402
from arex.grading.judge import Judge  # noqa: E402
from arex.grading.languages import language_named  # noqa: E402
from arex.grading.pool import GradingPool  # noqa: E402
from arex.sandbox.docker import sandbox_client  # noqa: E402

N_TESTS = int(os.environ.get("B_N", 200))
ROUNDS = int(os.environ.get("B_ROUNDS", 3))
CPP = (
    '#include <cstdio>\nint main(){int n; long long s=0, x; if(scanf("%d",&n)!=1) return 0; '
    'while(n-- > 0 && scanf("%lld",&x)==1) s+=x; printf("%lld\\n", s);}\n'
)
PY = "import sys\nnums = sys.stdin.read().split()\nprint(sum(map(int, nums[1:1 + int(nums[0])])))\n"


def make_env(root: Path, n_tests: int) -> Path:
    """A built env (task.yaml listing its tests) of `n_tests` small inputs: sum n numbers."""
    env = root / "sum-many"
    (env / "private" / "tests").mkdir(parents=True)
    rng = random.Random(7)
    lines = []
    for i in range(n_tests):
        name = f"sample-{i + 1}" if i < 2 else f"main-{i - 1:03d}"
        nums = [rng.randint(-(10**9), 10**9) for _ in range(rng.randint(1, 20))]
        (env / "private" / "tests" / f"{name}.in").write_text(f"{len(nums)}\n{' '.join(map(str, nums))}\n")
        (env / "private" / "tests" / f"{name}.ans").write_text(f"{sum(nums)}\n")
        lines.append(
            f"  - {{name: {name}, input: tests/{name}.in, answer: tests/{name}.ans, "
            f"group: {'sample' if i < 2 else 'main'}, sample: {str(i < 2).lower()}}}"
        )
    (env / "statement.md").write_text("Print the sum of n numbers.\n")
    (env / "task.yaml").write_text(
        "id: sum-many\ntitle: Sum many\ntime_limit_s: 1.0\nmemory_mb: 256\nchecker: {kind: token}\ntests:\n"
        + "\n".join(lines)
        + "\n"
    )
    return env


@dataclass
class Timing:
    wall_s: float = 0.0
    host_cpu_s: float = 0.0
    """This process (arex: the client; native: the loop) plus its children (native: the programs)."""
    box_cpu_s: float = 0.0
    """The grading container's cgroup (arex only)."""
    shim_cpu_s: float = 0.0
    program_cpu_s: float = 0.0
    """The programs' own CPU time, as reported (arex: the runner's wait4; native: RUSAGE_CHILDREN)."""
    accepted: int = 0
    tests: int = 0
    parts: dict[str, float] = field(default_factory=dict)


def _host_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _box_cpu(container_id: str) -> float:
    return cgroup_cpu(container_id) or 0.0


def _shim_pid(container_id: str) -> int:
    pid = sandbox_client().api.inspect_container(container_id)["State"]["Pid"]
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def arex_grade(pool: GradingPool, box_id: str, code: str, language: str) -> Timing:
    """One grading as a rollout's: lease, grade, give back; until the pool's cleaning and check of
    the container is done (all in this process's threads and the container: both counted)."""
    shim = _shim_pid(box_id)
    before = (time.perf_counter(), _host_cpu(), _box_cpu(box_id), proc_cpu(shim, children=False))
    with pool.lease() as lease:
        _same_box(lease.box, box_id, pool)
        result = pool.judge.grade(code, language, box=lease.box, checker_box=lease.checker)
    _settle(pool)
    after = (time.perf_counter(), _host_cpu(), _box_cpu(box_id), proc_cpu(shim, children=False))
    tests = result.details["tests"]
    return Timing(
        wall_s=after[0] - before[0],
        host_cpu_s=after[1] - before[1],
        box_cpu_s=after[2] - before[2],
        shim_cpu_s=after[3] - before[3],
        program_cpu_s=sum(t["time_s"] or 0.0 for t in tests),
        accepted=sum(t["verdict"] == "AC" for t in tests),
        tests=len(tests),
    )


def _same_box(box, box_id: str, pool: GradingPool) -> None:
    """The figures read one container's cgroup: a replaced container would make them meaningless."""
    if box.id != box_id:
        raise SystemExit(
            f"the grading pool replaced its container (a check failed: {pool.failures[-1:]}); "
            "the bench measures one reused container"
        )


def _settle(pool: GradingPool) -> None:
    """Wait for the pool's cleaning of the lease just given back; it must have passed its check."""
    if not pool.settle():
        raise SystemExit("the grading pool's cleaning did not finish in time")
    if pool.replaced:
        raise SystemExit(f"a check failed after a grading and the container was removed: {pool.failures[-1]}")


def native_run(env: Path, code: str, language: str, work: Path) -> Timing:
    """Compile like the judge (same flags, on the host), then run every test by subprocess."""
    spec = load_spec(env)
    lang = language_named(language)
    work.mkdir()
    before_wall, before_cpu = time.perf_counter(), _host_cpu()
    (work / lang.source).write_text(code)
    if lang.compile:
        subprocess.run(list(lang.compile), cwd=work, check=True, capture_output=True)
    compiled_at = time.perf_counter()
    children_before = os.times()
    accepted = 0
    run = [_interpreter(lang.run[0]), *lang.run[1:]]
    for test in spec.tests:
        stdin = (env / "private" / test.input).read_bytes()
        proc = subprocess.run(run, cwd=work, input=stdin, capture_output=True, timeout=10)
        answer = (env / "private" / test.answer).read_text(errors="replace")
        accepted += (
            proc.returncode == 0 and check_builtin(spec.checker, proc.stdout.decode(errors="replace"), answer).accepted
        )
    children_after = os.times()
    wall = time.perf_counter() - before_wall
    program = (
        children_after.children_user
        + children_after.children_system
        - children_before.children_user
        - children_before.children_system
    )
    return Timing(
        wall_s=wall,
        host_cpu_s=_host_cpu() - before_cpu,
        program_cpu_s=program,
        accepted=accepted,
        tests=len(spec.tests),
        parts={"compile_s": compiled_at - before_wall},
    )


def _interpreter(program: str) -> str:
    """The host's real python3 (Debian's, as in the image): a version manager's `python3` on PATH
    may be a shell-script shim costing ~100 ms a start, which is no part of running a program."""
    if program != "python3":
        return program
    return "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable


def profile(pool: GradingPool, box_id: str, code: str, language: str) -> dict[str, float]:
    """Where arex's time goes for one language: one grading's steps timed apart (B_PROFILE=1),
    the pool's cleaning after it last."""
    with pool.lease() as lease:
        _same_box(lease.box, box_id, pool)
        parts = _profile_steps(pool.judge, lease.box, code, language)
        started = time.perf_counter()
    _settle(pool)
    parts["clean_s"] = time.perf_counter() - started
    return parts


def _profile_steps(judge: Judge, box, code: str, language: str) -> dict[str, float]:
    lang = language_named(language).for_submission(code, judge.spec.memory_mb)
    parts: dict[str, float] = {}
    started = time.perf_counter()
    judge._compile(box, lang, code)
    parts["compile_s"] = time.perf_counter() - started
    started = time.perf_counter()
    judge._limit_memory(box)
    parts["memory_limit_s"] = time.perf_counter() - started
    outputs, runs = {}, []
    started = time.perf_counter()
    for result, output in judge._run_tests(box, lang.run, judge.spec.tests, stop_on_failure=False):
        outputs[result.name] = output or ""
        runs.append(result.wall_s or 0.0)
    parts["runs_s"] = time.perf_counter() - started
    parts["runs_in_box_s"] = sum(runs)  # the runner's own measure: each run's start to its end
    parts["between_runs_ms_per_test"] = (parts["runs_s"] - parts["runs_in_box_s"]) / len(runs) * 1000
    started = time.perf_counter()
    for test in judge.spec.tests[:20]:  # one request per test, as before the pipeline
        judge._run(box, lang.run, test)
    parts["alone_ms_per_test"] = (time.perf_counter() - started) / 20 * 1000
    started = time.perf_counter()
    judge.check_outputs(outputs)
    parts["check_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(20):
        box.exec(["true"], timeout=10, cwd="/")
    parts["bare_exec_ms"] = (time.perf_counter() - started) / 20 * 1000
    return parts


def main() -> None:
    languages = (("C++", "cpp17", CPP), ("Python", "python3", PY))
    with tempfile.TemporaryDirectory(prefix="arex-bench-judge-") as tmp:
        root = Path(tmp)
        env = make_env(root, N_TESTS)
        judge = Judge(env, load_spec(env))
        pool = GradingPool(judge, cap=1, name="bench")
        try:
            with pool.lease() as lease:  # warm: the container's start and first check, first exec, image pages
                box_id = lease.box.id
                judge.grade(CPP, "cpp17", box=lease.box, samples_only=True)
            _settle(pool)
            runs: dict[str, tuple[list[Timing], list[Timing]]] = {label: ([], []) for label, _, _ in languages}
            # Other load on the host stretches either side at random: sides alternate, and each
            # keeps its best round (the one least disturbed).
            for round_ in range(ROUNDS):
                for label, language, code in languages:
                    sides = [
                        lambda: runs[label][0].append(arex_grade(pool, box_id, code, language)),
                        lambda: runs[label][1].append(
                            native_run(env, code, language, root / f"native-{language}-{round_}")
                        ),
                    ]
                    for side in sides if round_ % 2 == 0 else sides[::-1]:
                        side()
            rows = [
                (label, min(a, key=lambda t: t.wall_s), min(n, key=lambda t: t.wall_s))
                for label, (a, n) in runs.items()
            ]
            parts = (
                {language: profile(pool, box_id, code, language) for _, language, code in languages}
                if os.environ.get("B_PROFILE")
                else {}
            )
        finally:
            pool.close()
    report(rows, parts)


def report(rows, parts) -> None:
    print(
        f"{N_TESTS} tests per language, best of {ROUNDS} alternating rounds; "
        "arex: one pooled grading container, its cleaning included; native: subprocess per test on the host"
    )
    header = (
        f"{'language':9} {'side':7} {'wall s':>8} {'ms/test':>8} {'host CPU s':>11} {'box CPU s':>10} "
        f"{'shim CPU s':>11} {'program CPU s':>14} {'AC':>8}"
    )
    print(header)
    for label, arex, native in rows:
        for side, t in (("arex", arex), ("native", native)):
            print(
                f"{label:9} {side:7} {t.wall_s:8.2f} {t.wall_s / t.tests * 1000:8.2f} {t.host_cpu_s:11.2f} "
                f"{t.box_cpu_s:10.2f} {t.shim_cpu_s:11.2f} {t.program_cpu_s:14.2f} {t.accepted:4}/{t.tests}"
            )
        arex_cpu, native_cpu = arex.host_cpu_s + arex.box_cpu_s + arex.shim_cpu_s, native.host_cpu_s
        compile_s = native.parts.get("compile_s", 0.0)
        print(
            f"{label:9} ratio   {arex.wall_s / native.wall_s:8.2f}   CPU ratio {arex_cpu / native_cpu:.2f} "
            f"(arex {arex_cpu:.2f} s, native {native_cpu:.2f} s; native compile {compile_s:.2f} s wall)"
        )
    for language, p in parts.items():
        print(f"profile {language}: " + ", ".join(f"{k}={v:.3f}" for k, v in p.items()))
    arex_s = sum(a.wall_s for _, a, _ in rows)
    native_s = sum(n.wall_s for _, _, n in rows)
    arex_cpu = sum(a.host_cpu_s + a.box_cpu_s + a.shim_cpu_s for _, a, _ in rows)
    native_cpu = sum(n.host_cpu_s for _, _, n in rows)
    tests = sum(a.tests for _, a, _ in rows)
    first = rows[0]
    print(
        f"arex_s={arex_s:.2f} native_s={native_s:.2f} ratio={arex_s / native_s:.2f} "
        f"cpp_ratio={first[1].wall_s / first[2].wall_s:.2f} cpu_ratio={arex_cpu / native_cpu:.2f} "
        f"per_test_ms={arex_s / tests * 1000:.2f} load={os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    if shutil.which("g++") is None:
        raise SystemExit("bench/judge_overhead.py compiles the C++ solution natively: install g++ on the host")
    main()
