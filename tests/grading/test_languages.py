"""Languages: C, Java and PyPy3 graded for real (AC, CE with its log, Java's memory and time limits),
and the Java main-class detection and JVM sizing they rely on."""

import pytest
from repo_paths import REPO

from arex.envs.build import write_env
from arex.envs.judge_sources import load
from arex.grading.judge import Judge
from arex.grading.languages import LANGUAGES, java_main_class, jvm_heap_mb, language_for, language_named
from arex.grading.pool import GradingPool

TASK = """
id: add-two
title: Add two
time_limit_s: 1.0
memory_mb: 128
checker: {kind: token}
solutions:
  - {path: solutions/ok.c, expected: accepted}
"""
CASES = {"sample-1": (2, 3), "main-1": (40, 2), "main-2": (-7, 1000000000000)}

C_OK = (
    "#include <stdio.h>\n#include <math.h>\n"
    'int main(void){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",(long long)(fabs(0.0)+a+b));return 0;}\n'
)
# Kattis submissions name their class anything, often beside helper classes and nested ones.
JAVA_OK = """import java.util.*;
// public class NotThisOne: a comment names no class
class Reader { static Scanner in = new Scanner(System.in); }
public final class AddTwo {
    static class Pair { long a, b; }
    public static void main(String[] args) {
        Pair p = new Pair(); p.a = Reader.in.nextLong(); p.b = Reader.in.nextLong();
        String braces = "} { public class Fake {";
        System.out.println(p.a + p.b);
    }
}
"""
JAVA_PACKAGED = (
    "package contest.sol;\nimport java.io.*;\nclass Go { public static void main(String[] x) throws IOException {\n"
    '  String[] t = new BufferedReader(new InputStreamReader(System.in)).readLine().trim().split("\\\\s+");\n'
    "  System.out.println(Long.parseLong(t[0]) + Long.parseLong(t[1])); } }\n"
)
PYPY_OK = "a, b = map(int, input().split())\nprint(a + b)\n"
JAVA_HOG = """import java.util.*;
public class Hog { public static void main(String[] a) {
    List<long[]> kept = new ArrayList<>();
    for (int i = 0; i < 4096; i++) kept.add(new long[1 << 17]);  // 1 MB each, 4 GB in all, all kept
    System.out.println(kept.size());
} }
"""
JAVA_LOOP = (
    "public class Spin { public static void main(String[] a) { long x = 0; while (true) x += a.length + 1; } }\n"
)
COMPILE_ERRORS = {
    "c11": ("int main(void) { return undeclared_name; }\n", "undeclared_name"),
    "java": ('public class Broken { public static void main(String[] a) { int x = "text"; } }\n', "incompatible types"),
    # 3.10's `match` is fine for python3 (3.11) but not for PyPy's 3.9 parser: PyPy checks its own syntax.
    "pypy3": ("match 1:\n    case 1:\n        print(1)\n", "SyntaxError"),
}


# -- detection and sizing (no Docker) ----------------------------------------------------------
def test_java_main_class_detection():
    assert java_main_class(JAVA_OK) == ("", "AddTwo")
    assert java_main_class(JAVA_PACKAGED) == ("contest.sol", "Go")
    assert java_main_class("class A {}\nclass B { public static void main(String... s) {} }") == ("", "B")
    assert java_main_class("class Only { static class Inner {} }") == ("", "Only")
    assert java_main_class("/* public class X {} */ int") == ("", "Main")  # nothing declared: the usual name
    text_block = 'class T { String s = """\n  public class Q {\n"""; public static void main(String[] a) {} }'
    assert java_main_class(text_block) == ("", "T")


def test_placeholders_filled_per_submission():
    java = language_named("java").for_submission(JAVA_PACKAGED, 256)
    assert java.source == "Go.java" and java.compile[-1] == "Go.java"
    assert java.run[-1] == "contest.sol.Go" and f"-Xmx{jvm_heap_mb(256)}m" in java.run and "-Xss256m" in java.run
    assert 0 < jvm_heap_mb(256) < 256 and jvm_heap_mb(8) > 0  # the JVM's own memory is left out of the limit
    python = language_named("python3")
    assert python.for_submission("print(1)", 256) is python  # its f-string braces are no placeholders
    assert all("{" not in arg for lang in LANGUAGES.values() for arg in lang.for_submission("class Main {}", 64).run)
    assert [language_for(f"x{ext}").name for ext in (".c", ".java", ".py", ".cc")] == [
        "c11",
        "java",
        "python3",
        "cpp17",
    ]


# -- graded for real ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A grading pool of one container for a tiny problem: every test here leases it in turn, so
    each grading runs in the container the previous one left, cleaned by the pool (as in a batch)."""
    src = tmp_path_factory.mktemp("src") / "add-two"
    (src / "private" / "tests").mkdir(parents=True)
    (src / "solutions").mkdir()
    (src / "task.yaml").write_text(TASK)
    (src / "statement.md").write_text("Print a + b.\n")
    (src / "solutions" / "ok.c").write_text(C_OK)
    for name, (a, b) in CASES.items():
        (src / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (src / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    problem = load(src)[0]
    env = tmp_path_factory.mktemp("env") / "add-two"
    write_env(problem, env)
    pool = GradingPool(Judge(env, problem.spec), cap=1)
    yield pool
    pool.close()


def _grade(pool: GradingPool, code: str, language: str, **options):
    """Grade in a lease, as a rollout does; the container the previous grading left passed its check."""
    with pool.lease() as lease:
        result = pool.judge.grade(code, language, box=lease.box, checker_box=lease.checker, **options)
    assert pool.replaced == 0, pool.failures
    return result


def _verdicts(result) -> set[str]:
    return {t["verdict"] for t in result.details["tests"]}


@pytest.mark.docker
@pytest.mark.parametrize(
    "language,code",
    [("c11", C_OK), ("java", JAVA_OK), ("java", JAVA_PACKAGED), ("pypy3", PYPY_OK)],
    ids=["c11", "java", "java-package", "pypy3"],
)
def test_accepted(judged, language, code):
    result = _grade(judged, code, language)
    assert _verdicts(result) == {"AC"}, result.details["tests"]
    assert result.held_out_score == 1.0 and result.public_score == 1.0
    assert all(t["time_s"] < 1.0 and t["memory_kb"] < 128 * 1024 for t in result.details["tests"])


@pytest.mark.docker
@pytest.mark.parametrize("language", list(COMPILE_ERRORS))
def test_compile_error_with_its_log(judged, language):
    code, fragment = COMPILE_ERRORS[language]
    result = _grade(judged, code, language)
    assert _verdicts(result) == {"CE"} and result.held_out_score == 0.0
    assert fragment in result.details["compile_log"] and fragment in result.feedback


@pytest.mark.docker
def test_java_over_the_memory_limit_is_not_accepted(judged):
    result = _grade(judged, JAVA_HOG, "java")
    hidden = [t for t in result.details["tests"] if not t["sample"]]
    # Its heap cap (-Xmx) stops it with OutOfMemoryError (RE), or the container's limit does (MLE).
    assert {t["verdict"] for t in hidden} <= {"MLE", "RE"} and result.held_out_score == 0.0, hidden
    sample = next(t for t in result.details["tests"] if t["sample"])
    assert sample["verdict"] == "MLE" or "OutOfMemoryError" in sample["message"], sample


@pytest.mark.docker
def test_java_infinite_loop_is_tle_by_cpu_time(judged):
    result = _grade(judged, JAVA_LOOP, "java", stop_on_failure=True)
    first = result.details["tests"][0]
    assert first["verdict"] == "TLE" and first["time_s"] >= 0.9, first


def test_every_language_has_a_starter_and_a_noop():
    from arex.envs.judge_build import NOOP, STARTERS

    assert set(STARTERS) == set(NOOP) == set(LANGUAGES)


def test_languages_are_in_the_base_image_recipe():
    recipe = (REPO / "scripts" / "build_base_image.sh").read_text()
    packages = recipe.split('PACKAGES="', 1)[1].split('"', 1)[0].split(",")
    assert {"gcc", "g++", "python3", "default-jdk-headless", "pypy3"} <= set(packages)
