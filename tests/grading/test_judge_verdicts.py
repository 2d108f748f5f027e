"""Verdicts come from the program's own CPU time and memory, never from the host's load.

Each case here was once judged wrong: a program over its memory limit accepted (the container's
limit leaves room for the command server), a CPU hog whose stderr had no final newline accepted,
and, on a busy host, accepted and crashing programs judged TLE because the wall clock fired first.
The load cases run the same submissions while host processes compete for every CPU.
"""

from __future__ import annotations

import pytest
from host_load_kit import HostLoad

from arex.envs.build import write_env
from arex.envs.judge_sources import load

TASK = """
id: tight
title: Tight limits
time_limit_s: 0.5
memory_mb: 48
output_limit_mb: 1
checker: {kind: token}
scoring: fraction
"""

# Spins until the process's own CPU clock reaches the given seconds, on any machine at any load.
BUSY = "while (clock() < %g * CLOCKS_PER_SEC) {}"
# Writes every page of n MiB through a volatile pointer, so the compiler cannot leave it out.
TOUCH = (
    '#include <cstdio>\n#include <cstdlib>\nint main(){int a,b;scanf("%%d %%d",&a,&b);'
    "volatile char*p=(volatile char*)malloc(%d<<20);for(long i=0;i<(%d<<20);i+=4096)p[i]=1;"
    'printf("%%d\\n",a+b+p[4096]-1);}\n'
)
PROGRAMS = {
    "AC-busy": '#include <cstdio>\n#include <ctime>\nint main(){int a,b;scanf("%d %d",&a,&b);'
    + BUSY % 0.3
    + 'printf("%d\\n",a+b);}\n',
    "AC-memory-within": TOUCH % (24, 24),
    "MLE-just-over": TOUCH % (56, 56),
    "TLE-cpu-quiet-stderr": '#include <cstdio>\n#include <ctime>\nint main(){int a,b;scanf("%d %d",&a,&b);'
    + BUSY % 0.75
    + 'fprintf(stderr,"no newline");printf("%d\\n",a+b);}\n',
    "RE-segfault": "int main(){volatile int *p = nullptr; *p = 1;}\n",
    "MLE-bomb": (
        "#include <cstring>\n#include <cstdlib>\n"
        "int main(){for(;;){char*p=(char*)malloc(1<<20);if(!p)return 3;memset(p,1,1<<20);}}\n"
    ),
    "TLE-sleeping": "#include <unistd.h>\nint main(){sleep(60);}\n",
}


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    from arex.grading.judge import Judge

    src = tmp_path_factory.mktemp("src") / "tight"
    (src / "private" / "tests").mkdir(parents=True)
    (src / "task.yaml").write_text(TASK)
    (src / "statement.md").write_text("Print a + b.\n")
    for name, (a, b) in {"sample-1": (1, 2), "main-1": (3, 4), "main-2": (5, 6)}.items():
        (src / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (src / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    problem = load(src)[0]
    env = tmp_path_factory.mktemp("env") / "tight"
    write_env(problem, env)
    return Judge(env, problem.spec)


def _hidden(result) -> list[dict]:
    return [t for t in result.details["tests"] if not t["sample"]]


def _grade_all(judge) -> dict[str, tuple[set[str], list[dict]]]:
    """Every program in turn, leased from a pool of one container as in a batch: each grading runs
    in the container the one before left (a memory bomb, a sleeper), cleaned and checked by the pool."""
    from arex.grading.pool import GradingPool

    pool = GradingPool(judge, cap=1)
    try:
        return {
            name: ({t["verdict"] for t in _hidden(r)}, _hidden(r))
            for name, r in ((n, _grade(pool, c)) for n, c in PROGRAMS.items())
        }
    finally:
        pool.close()


def _grade(pool, code: str):
    with pool.lease() as lease:
        result = pool.judge.grade(code, "cpp17", box=lease.box, checker_box=lease.checker)
    assert pool.replaced == 0, pool.failures  # the container the previous grading left passed its check
    return result


def _expected(name: str) -> str:
    return name.split("-")[0]


@pytest.mark.docker
def test_verdicts_from_cpu_time_and_peak_memory(judge):
    seen = _grade_all(judge)
    for name, (verdicts, hidden) in seen.items():
        assert verdicts == {_expected(name)}, (name, hidden)
    over = seen["MLE-just-over"][1][0]
    assert over["memory_kb"] > 48 * 1024 and "48 MB" in over["message"]
    quiet = seen["TLE-cpu-quiet-stderr"][1][0]
    assert quiet["time_s"] > 0.5 and "CPU time" in quiet["message"]
    for name in ("RE-segfault", "AC-busy"):
        assert all("ulimit" not in t["message"] and "bash" not in t["message"] for t in seen[name][1])


@pytest.mark.docker
def test_same_verdicts_under_host_load(judge):
    with HostLoad():
        seen = _grade_all(judge)
    for name, (verdicts, hidden) in seen.items():
        assert verdicts == {_expected(name)}, (name, hidden)
    # The load really slowed the programs down: an accepted run took longer on the wall clock than
    # the wall limit, so without the starvation-aware backstop it would have been a TLE.
    slowest = max(t["wall_s"] for t in seen["AC-busy"][1])
    assert slowest > judge.wall_limit_s, (
        f"the host load did not starve the program (wall {slowest:.2f}s); raise HostLoad.weight"
    )
    sleeper = seen["TLE-sleeping"][1][0]
    assert "wall-clock" in sleeper["message"] and sleeper["wall_s"] < judge.starved_cap_s  # idle is not starved


@pytest.mark.docker
def test_checker_compile_timeout_names_the_timeout(tmp_path, monkeypatch):
    """A checker that does not finish compiling is reported as a timeout, not an empty compile log."""
    import arex.grading.judge as judge_module
    from arex.grading.judge import Judge
    from arex.hashing import cache_dir, tree_sha256
    from arex.specs import CheckerSpec, JudgeSpec, TestCase

    (tmp_path / "private" / "checker").mkdir(parents=True)
    # Template recursion that takes the compiler far longer than the lowered timeout below.
    heavy = (
        "template<int N> struct F { static const long v = F<N-1>::v + F<N-2>::v; };\n"
        "template<> struct F<1> { static const long v = 1; }; template<> struct F<0> { static const long v = 0; };\n"
        "int main() { return F<40>::v > 0 ? 0 : 1; }\n" + "".join(f"template struct F<{n}>;\n" for n in range(2, 40))
    )
    (tmp_path / "private" / "checker" / "chk.cpp").write_text(
        heavy + "\n".join(f"auto x{i} = [](auto a){{ return a * {i}; }};" for i in range(20000)) + "\n"
    )
    spec = JudgeSpec(
        id="slow-checker",
        title="t",
        time_limit_s=1,
        tests=(TestCase(name="1", input="1.in", answer="1.ans"),),
        checker=CheckerSpec(kind="testlib", source="checker/chk.cpp"),
    )
    monkeypatch.setattr(judge_module, "CHECKER_COMPILE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(judge_module, "STARVED_COMPILE_CAP_S", 0.5)
    with pytest.raises(RuntimeError, match="timeout"):
        Judge(tmp_path, spec).checker_binary()
    # nothing half-built is cached
    assert not (cache_dir() / "checkers" / tree_sha256(tmp_path / "private" / "checker")[:24] / "checker").exists()
