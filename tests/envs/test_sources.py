"""Problem source loaders on the shapes real archives have (no Docker): Kattis statements and
submissions.yaml, rejected package types, generated data, submission languages (Python 2 told
apart), Frontier-CS layouts, interactive packages, CodeContests rows, and samples that equal a
hidden test."""

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError
from repo_paths import TESTS

from arex.envs.judge_sources import Problem, SourceError, load
from arex.envs.sources.kattis_submissions import expectation
from arex.envs.sources.latex import latex_to_markdown
from arex.envs.sources.programs import classify, is_python2
from arex.grading.interactive import InteractiveRun
from arex.grading.languages import LANGUAGES
from arex.specs import CheckerSpec, JudgeSpec

CORPUS = TESTS / "corpus"
ADD_PY = "a, b = map(int, input().split())\nprint(a + b)\n"


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def kattis(root: Path, meta: str = "name: Add\n", **extra: str) -> Path:
    files = {
        "problem.yaml": meta,
        "statement/problem.en.md": "Add two integers.\n",
        "data/sample/1.in": "1 2\n",
        "data/sample/1.ans": "3\n",
        "data/secret/1.in": "2 3\n",
        "data/secret/1.ans": "5\n",
        "submissions/accepted/add.py": ADD_PY,
    }
    return write(root, {**files, **extra})


def only(path: Path) -> Problem:
    problems = load(path)
    assert len(problems) == 1
    return problems[0]


# -- Kattis statements ---------------------------------------------------------------------------
def test_latex_statement_becomes_markdown():
    tex = r"""
        \problemname{Ribbon $k$-Cutting}
        % a comment that must vanish
        \illustration{0.3}{pic.png}{A \emph{cut} ribbon}
        Cut $L$ into pieces of $k$ --- 50\% of them ``long''.
        \section*{Input}
        \begin{itemize}
          \item one line with \textbf{two} integers $L, k$ ($1 \le k \le 10^{18}$);
          \item then:
          \begin{enumerate}
            \item the \texttt{first} thing
          \end{enumerate}
        \end{itemize}
            Indented text is not a code block.
        \section{Output}
        $$\sum_{i=1}^{n} i$$ and \[ x^2 \]
        \begin{figure}[h] \includegraphics{f.pdf} \caption{The graph} \end{figure}
        \begin{verbatim}
        keep % this -- as is
        \end{verbatim}
        \mystery{kept text} \alsounknown and \href{https://example.org}{a link}.
        \begin{tabular}{|l|r|} a & $b$ \\ \hline 1 & 2 \\ \end{tabular}
        """
    md = latex_to_markdown(textwrap.dedent(tex))
    assert md.startswith("# Ribbon $k$-Cutting\n")
    assert "comment" not in md
    assert "> Illustration omitted: A *cut* ribbon" in md and "> Figure omitted: The graph" in md
    assert 'Cut $L$ into pieces of $k$ — 50% of them "long".' in md
    assert "## Input" in md and "## Output" in md
    assert "- one line with **two** integers $L, k$ ($1 \\le k \\le 10^{18}$);" in md
    assert "  1. the `first` thing" in md
    assert "\nIndented text is not a code block." in md  # no 4-space indent left
    assert "$$\\sum_{i=1}^{n} i$$" in md and "$$ x^2 $$" in md
    assert "```\nkeep % this -- as is\n```" in md
    assert "kept text" in md and "\\mystery" not in md and "\\alsounknown" not in md
    assert "[a link](https://example.org)" in md
    assert "| a | $b$ |\n|---|---|\n| 1 | 2 |" in md


def test_english_statement_preferred_and_samples_put_into_statement_and_workspace(tmp_path):
    root = kattis(
        tmp_path / "p",
        "name: {de: Addieren, en: Add Them}\n",
        **{
            "statement/problem.de.md": "Addiere.\n",
            "problem_statement/problem.en.tex": "\\problemname{Old}\nOld statement.\n",
        },
    )
    problem = only(root)
    assert problem.statement.startswith("# Add Them\n\nAdd two integers.")  # 2023+ md first, titled
    assert (
        "## Sample 1\n" in problem.statement
        and "```\n1 2\n```" in problem.statement
        and "```\n3\n```" in problem.statement
    )
    assert problem.files["workspace/samples/1.in"] == root / "data/sample/1.in"
    assert problem.files["workspace/samples/1.ans"] == root / "data/sample/1.ans"
    assert not any(k.startswith("workspace/samples/") and "secret" in str(v) for k, v in problem.files.items())
    (root / "statement" / "problem.en.md").unlink()
    assert only(root).statement.startswith("# Old\n\nOld statement.")  # then English LaTeX, legacy folder
    (root / "problem_statement" / "problem.en.tex").unlink()
    assert "Addiere." in only(root).statement  # any language rather than none


def test_samples_go_where_the_statement_places_them(tmp_path):
    root = kattis(tmp_path / "p", **{"statement/problem.en.md": "Before.\n\n{{nextsample}}\n\nAfter.\n"})
    statement = only(root).statement
    assert statement.index("Before.") < statement.index("## Sample 1") < statement.index("After.")


# -- rejected package types ----------------------------------------------------------------------
@pytest.mark.parametrize("types", ["type: [pass-fail, multi-pass]", "type: pass-fail multi-pass", "type: multi-pass"])
def test_multi_pass_is_rejected(tmp_path, types):
    root = kattis(tmp_path / "p", f"problem_format_version: 2023-07-draft\nname: Add\n{types}\n")
    with pytest.raises(SourceError, match=r"problem\.yaml: field 'type': multi-pass problems are not supported"):
        load(root)


def test_submit_answer_is_rejected(tmp_path):
    with pytest.raises(SourceError, match="submit-answer problems are not supported"):
        load(kattis(tmp_path / "p", "name: Add\ntype: [pass-fail, submit-answer]\n"))


def test_generated_tests_are_named_as_such(tmp_path):
    root = kattis(tmp_path / "p", **{"generators/generators.yaml": "data: {}\n"})
    for name in ("1.in", "1.ans"):
        (root / "data" / "secret" / name).unlink()
    with pytest.raises(
        SourceError, match=r"tests are generated: run the package's generator first \(generators/generators\.yaml"
    ):
        load(root)
    (root / "generators" / "generators.yaml").unlink()
    (root / "generators").rmdir()
    (root / "data" / "generator.sh").write_text(". ../../testdata_tools/gen.sh\n")  # Kattis testdata_tools
    with pytest.raises(SourceError, match=r"generator first \(data/generator\.sh"):
        load(root)
    (root / "data" / "generator.sh").unlink()
    with pytest.raises(SourceError, match="no hidden tests found"):
        load(root)


# -- submission languages ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "code",
    [
        "print 'hi'\n",
        "x = int(raw_input())\nprint x * 2\n",
        "try:\n    pass\nexcept ValueError, e:\n    pass\n",
        "#!/usr/bin/env python2\nprint(1)\n",  # declared: its `/` divides as Python 2's
        "n = int(raw_input())\nprint(n)\n",  # compiles as 3, fails at run time
        "for i in xrange(3):\n    print(i)\n",
        "d = {}\nfor k, v in d.iteritems():\n    print(k)\n",
        "x = 0777\n",
        "print `1`\n",
    ],
)
def test_python2_code_is_recognised(code):
    assert is_python2(code)


@pytest.mark.parametrize(
    "code",
    [
        "print(1)\n",
        "s = 'print x'\nprint(s)\n",  # a py2-looking string in py3 code
        "try:\n    input = raw_input\nexcept NameError:\n    pass\nprint(input())\n",  # 2-and-3 code
        "def xrange(n):\n    return range(n)\nprint(list(xrange(2)))\n",  # defines the name itself
        "long = 5\nprint(long)\n",
        "#!/usr/bin/env python3\nprint(1)\n",
        "def broken(:\n",  # not Python of any version: the judge says so, not "python2"
    ],
)
def test_python3_code_is_not_python2(code):
    assert not is_python2(code)


def test_submissions_get_the_language_table_or_a_reason():
    python = next(name for name, lang in LANGUAGES.items() if ".py" in lang.extensions)
    assert classify("a.py", "print(1)\n") == (python, "")
    assert classify("a.py", "print 1\n") == (None, "python2")
    assert classify("a.py2", "print(1)\n") == (None, "python2")
    assert classify("A.kt", "fun main() {}") == (None, "language .kt")
    for name, language in LANGUAGES.items():  # every extension of the table is honoured
        for ext in language.extensions:
            assert classify(f"x{ext}", "") == (name, "")


def test_skipped_submissions_are_recorded_with_a_summary(tmp_path):
    root = kattis(
        tmp_path / "p",
        "name: Echo\n",
        **{
            "submissions/accepted/add.py": "a, b = map(int, raw_input().split())\nprint a + b\n",
            "submissions/accepted/old.py2": "print 1\n",
            "submissions/accepted/add.kt": "fun main() {}\n",
            "submissions/wrong_answer/zero.py": "print(0)\n",
        },
    )
    problem = only(root)
    assert not [s for s in problem.spec.solutions if s.expected == "accepted"]
    assert sorted(problem.skipped) == [
        ("submissions/accepted/add.kt", "accepted", "language .kt"),
        ("submissions/accepted/add.py", "accepted", "python2"),
        ("submissions/accepted/old.py2", "accepted", "python2"),
    ]
    assert (
        problem.skipped_summary("accepted")
        == "3 accepted submissions, all in skipped languages: language .kt, python2 ×2"
    )
    assert problem.skipped_summary("wrong_answer") == ""
    (root / "submissions/accepted/add.kt").unlink()
    (root / "submissions/accepted/old.py2").unlink()
    assert only(root).skipped_summary("accepted") == "1 accepted submission, in a skipped language: python2"
    write(root, {"submissions/accepted/good.py": ADD_PY})
    assert only(root).skipped_summary("accepted") == "1 accepted submission skipped (python2)"


def test_python2_only_corpus_package_is_all_skipped():
    problem = only(CORPUS / "kattis-python2-only")
    assert problem.skipped_summary("accepted") == "3 accepted submissions, all in skipped languages: python2"


# -- submissions.yaml ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "entries", "category"),
    [
        ("accepted/a.py", {}, "accepted"),
        ("wrong_answer/a.py", {}, "wrong_answer"),
        ("time_limit_exceeded/a.py", {}, "time_limit_exceeded"),
        ("run_time_error/a.py", {}, "run_time_error"),
        ("rejected/a.py", {}, None),  # "some failure": no arex category
        ("brute_force/a.py", {}, None),
        ("mixed/a.py", {}, None),  # a folder without any expectation
        (
            "accepted/a.py",
            {"accepted": {"permitted": ["WA"], "required": ["WA"]}},
            "wrong_answer",
        ),  # the folder key replaces the default
        ("crash/a.py", {"crash": {"permitted": ["AC", "RTE"], "required": ["RTE"]}}, "run_time_error"),
        ("slow/a.cpp", {"slow/*.{py,cpp}": {"required": ["TLE"]}}, "time_limit_exceeded"),  # glob + braces
        ("slow/a.java", {"slow/*.{py,cpp}": {"required": ["TLE"]}}, None),
        ("x/deep/a.py", {"*/a.py": {"permitted": ["AC"]}}, None),  # * does not cross /
        ("x/deep/a.py", {"x/deep": {"permitted": ["AC"]}}, "accepted"),  # a parent folder matches
        ("ok/a.py", {"ok": {"permitted": ["AC"]}, "ok/a.py": {"secret/*-hard": {"required": ["AC"]}}}, "accepted"),
        (
            "tle/a.py",
            {"tle/a.py": {"sample": {"permitted": ["AC"]}, "secret/big": {"required": ["TLE"]}}},
            "time_limit_exceeded",
        ),
        ("wa/a.py", {"wa": {"permitted": ["WA"]}}, "wrong_answer"),
        ("accepted/p.py", {"accepted/p.py": {"score": [20, 60]}}, "partially_accepted"),
        ("accepted/f.py", {"accepted/f.py": {"score": 100}}, "accepted"),
        ("partially_accepted/a.py", {}, "partially_accepted"),  # legacy folder
    ],
)
def test_submissions_yaml_maps_to_arex_categories(path, entries, category):
    assert expectation(path, entries, "submissions.yaml", full_score=100.0).category == category


def test_submissions_yaml_in_a_package(tmp_path):
    root = kattis(
        tmp_path / "p",
        "problem_format_version: 2025-09\nname: Add\nlimits: {time_limit: 1}\n",
        **{
            "submissions/submissions.yaml": """
                accepted/*: {language: python3}
                crash: {permitted: [AC, RTE], required: [RTE]}
                other/guess.py: {permitted: [AC, WA, TLE, RTE]}
                """,
            "submissions/crash/div.py": "print(1 // 0)\n",
            "submissions/other/guess.py": "print(3)\n",
            "submissions/accepted/dir_program/main.py": ADD_PY,
            "submissions/accepted/two_files/a.py": ADD_PY,
            "submissions/accepted/two_files/b.py": ADD_PY,
        },
    )
    problem = only(root)
    assert sorted((s.path, s.expected) for s in problem.spec.solutions) == [
        ("solutions/accepted/add.py", "accepted"),
        ("solutions/accepted/dir_program/main.py", "accepted"),
        ("solutions/crash/div.py", "run_time_error"),
    ]
    assert ("submissions/accepted/two_files", "accepted", "multi-file submission") in problem.skipped
    assert any(p == "submissions/other/guess.py" and "no arex category" in r for p, _, r in problem.skipped)
    write(root, {"submissions/submissions.yaml": "accepted: {permitted: [OK]}\n"})
    with pytest.raises(SourceError, match=r"submissions\.yaml: key 'accepted\.permitted': must be a list of verdicts"):
        load(root)


# -- time limits ---------------------------------------------------------------------------------
def test_time_limit_fields_for_the_builder(tmp_path):
    legacy = only(kattis(tmp_path / "legacy", "name: Add\nlimits: {time_multiplier: 3}\n"))
    assert (legacy.time_multiplier, legacy.time_resolution) == (3.0, 1.0)
    assert only(kattis(tmp_path / "legacy-default")).time_multiplier == 5.0  # problemtools' legacy default
    new = only(kattis(tmp_path / "new", "problem_format_version: 2025-09\nname: Add\nlimits: {time_resolution: 0.5}\n"))
    assert (new.time_multiplier, new.time_resolution) == (2.0, 0.5)  # ac_to_time_limit's default
    fixed = only(kattis(tmp_path / "fixed", "problem_format_version: 2025-09\nname: Add\nlimits: {time_limit: 1.5}\n"))
    assert (fixed.time_multiplier, fixed.spec.time_limit_s) == (None, 1.5)
    with pytest.raises(SourceError, match=r"field 'limits\.time_resolution' must be above 0"):
        load(kattis(tmp_path / "bad", "name: Add\nlimits: {time_resolution: 0}\n"))


# -- output validator arguments per test data group --------------------------------------------
def _materialised(problem: Problem, env: Path) -> Path:
    """The env's private/ files, as the builder writes them: enough for Judge.check_outputs."""
    for rel, source in problem.files.items():
        if rel.startswith("private/"):
            (env / rel).parent.mkdir(parents=True, exist_ok=True)
            (env / rel).write_bytes(source if isinstance(source, bytes) else source.read_bytes())
    return env


def test_a_groups_own_output_validator_args_apply_to_its_tests(tmp_path):
    """A group's testdata.yaml (legacy string form) and a test's own <name>.yaml (2025-09 test case
    configuration) give the default validator other arguments than data/secret/ does; samples take
    data/'s. Before, only data/ or data/secret/ arguments were read: the tolerant answers were WA."""
    files = {
        "data/testdata.yaml": "output_validator_args: case_sensitive\n",
        "data/sample/1.in": "x\n",
        "data/sample/1.ans": "Yes\n",
        "data/secret/testdata.yaml": "output_validator_flags: float_tolerance 1e-9\n",
        "data/secret/exact/1.in": "1\n",
        "data/secret/exact/1.ans": "1.5\n",
        "data/secret/tolerant/testdata.yaml": "output_validator_args: float_tolerance 1e-2\n",
        "data/secret/tolerant/1.in": "2\n",
        "data/secret/tolerant/1.ans": "1.414213\n",
        "data/secret/tolerant/2.in": "3\n",
        "data/secret/tolerant/2.ans": "1.732050\n",
        "data/secret/tolerant/2.yaml": "output_validator_args: [float_absolute_tolerance, '0.5']\n",
    }
    problem = only(
        write(tmp_path / "p", {"problem.yaml": "name: Roots\n", "statement/problem.md": "Roots.\n", **files})
    )
    spec = problem.spec
    assert (spec.checker.kind, spec.checker.abs_tol) == ("float", 1e-9)
    own = {t.name: spec.checker_of(t) for t in spec.tests}
    assert (own["sample__1"].kind, own["sample__1"].case_sensitive) == ("token", True)
    assert spec.tests[[t.name for t in spec.tests].index("secret__exact__1")].checker is None  # data/secret's
    assert (own["secret__tolerant__1"].abs_tol, own["secret__tolerant__1"].rel_tol) == (1e-2, 1e-2)
    assert (own["secret__tolerant__2"].abs_tol, own["secret__tolerant__2"].rel_tol) == (0.5, 0.0)

    from arex.grading.judge import Judge

    judge = Judge(_materialised(problem, tmp_path / "env"), spec)
    checks = judge.check_outputs(
        {
            "sample__1": "yes\n",
            "secret__exact__1": "1.5\n",
            "secret__tolerant__1": "1.41\n",
            "secret__tolerant__2": "2\n",
        }
    )
    assert {name: c.accepted for name, c in checks.items()} == {
        "sample__1": False,  # data/'s case_sensitive
        "secret__exact__1": True,
        "secret__tolerant__1": True,
        "secret__tolerant__2": True,
    }
    assert not judge.check_outputs({"secret__tolerant__1": "1.40\n"})["secret__tolerant__1"].accepted


def test_a_custom_validator_gets_each_groups_arguments(tmp_path):
    """A custom output validator (and an interactor alike) keeps its program; only its arguments
    change per test; a task.yaml test with no arguments of its own has no checker key."""
    files = {
        "output_validators/v/validate.py": "import sys\nsys.exit(42)\n",
        "data/secret/a/1.in": "1\n",
        "data/secret/a/1.ans": "1\n",
        "data/secret/b/test_group.yaml": "output_validator_args: [--eps, '0.1']\n",
        "data/secret/b/1.in": "2\n",
        "data/secret/b/1.ans": "2\n",
    }
    meta = "name: Add\nvalidation: custom\nvalidator_flags: --strict\n"
    spec = only(kattis(tmp_path / "p", meta, **files)).spec
    flags = {t.name: spec.checker_of(t).flags for t in spec.tests}
    assert flags == {
        "sample__1": ("--strict",),
        "secret__1": ("--strict",),
        "secret__a__1": ("--strict",),
        "secret__b__1": ("--strict", "--eps", "0.1"),
    }
    assert {spec.checker_of(t).source for t in spec.tests} == {"checker/validate.py"}
    dumped = spec.model_dump(mode="json")["tests"]
    assert ["checker" in t for t in dumped] == [t.name == "secret__b__1" for t in spec.tests]
    assert JudgeSpec.model_validate(spec.model_dump(mode="json")) == spec
    other = spec.tests[0].model_copy(update={"checker": CheckerSpec(kind="kattis", source="checker/other.py")})
    with pytest.raises(ValidationError, match="may change only the arguments of the env's checker"):
        JudgeSpec.model_validate({**spec.model_dump(mode="json"), "tests": [other.model_dump(mode="json")]})


def test_an_interactor_gets_each_groups_arguments(tmp_path):
    files = {
        "output_validator/interactor.py": "import sys\nsys.exit(42)\n",
        "data/sample/1.interaction": ">1\n",
        "data/secret/hard/test_group.yaml": "output_validator_args: [--rounds, '3']\n",
        "data/secret/hard/1.in": "1\n",
        "data/secret/hard/1.ans": "1\n",
    }
    meta = "problem_format_version: 2025-09\nname: G\ntype: interactive\nlimits: {time_limit: 1}\n"
    spec = only(kattis(tmp_path / "p", meta, **files)).spec
    run = SimpleNamespace(spec=spec)  # the command depends on the spec and the test only
    commands = {t.name: InteractiveRun._command(run, t) for t in spec.tests}
    assert commands["secret__hard__1"][-2:] == ["--rounds", "3"]
    assert commands["secret__1"][-1].endswith("/feedback/")


# -- interactive packages ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("meta", "vdir"),
    [
        ("name: Guess\nvalidation: custom interactive\nvalidator_flags: strict\n", "output_validators/guesser"),
        (
            "problem_format_version: 2025-09\nname: Guess\ntype: [pass-fail, interactive]\nlimits: {time_limit: 1}\n",
            "output_validator",
        ),
    ],
)
def test_kattis_interactive_uses_the_validator_as_interactor(tmp_path, meta, vdir):
    root = kattis(
        tmp_path / "p",
        meta,
        **{
            f"{vdir}/interactor.cpp": '#include "validate.h"\nint main() { return 42; }\n',
            f"{vdir}/validate.h": "// helpers\n",
            "data/sample/1.interaction": ">5\n<lower\n>3\n<correct\n",
        },
    )
    problem = only(root)
    checker = problem.spec.checker
    assert (checker.kind, checker.protocol, checker.source) == ("interactive", "kattis", "checker/interactor.cpp")
    assert ("strict",) == checker.flags or "validation" not in meta
    assert {"private/checker/interactor.cpp", "private/checker/validate.h"} <= set(problem.files)
    assert "```\n>5\n<lower\n>3\n<correct\n```" in problem.statement  # the transcript, for the statement only
    assert not any(k.startswith("workspace/samples/") for k in problem.files)


def test_interactive_without_a_validator_is_named(tmp_path):
    with pytest.raises(SourceError, match=r"field 'type': interactive problem but no validator source"):
        load(kattis(tmp_path / "p", "name: G\ntype: interactive\n"))


# -- Frontier-CS ---------------------------------------------------------------------------------
def frontier(root: Path, config: str, n: int, **extra: str) -> Path:
    files = {"config.yaml": config, "statement.txt": "Time limit: 1 second\n# Big Number\nPrint x.\n", **extra}
    for i in range(1, n + 1):
        files[f"testdata/{i}.in"] = f"{i}\n"
        files[f"testdata/{i}.ans"] = f"{i}\n"
    return write(root, files)


CHECKER = (
    '#include "testlib.h"\nint main(int argc, char* argv[]) { registerTestlibCmd(argc, argv); quitf(_ok, "ok"); }\n'
)


def test_frontier_single_case_is_hidden_only(tmp_path):
    root = tmp_path / "algorithmic" / "problems" / "7"
    write(tmp_path / "algorithmic" / "judge" / "include", {"testlib.h": "// testlib\n"})
    problem = only(
        frontier(
            root,
            "type: default\nchecker: chk.cc\ntime: 1s\nmemory: 256m\nsubtasks:\n  - score: 100\n    n_cases: 1\n",
            1,
            **{"chk.cc": CHECKER},
        )
    )
    assert [(t.name, t.sample) for t in problem.spec.tests] == [("1", False)]
    assert problem.spec.title == "Big Number"
    # testlib.h found where the Frontier-CS repository keeps it (algorithmic/judge/include/)
    assert problem.files["private/checker/testlib.h"] == tmp_path / "algorithmic" / "judge" / "include" / "testlib.h"
    three = only(
        frontier(
            tmp_path / "three",
            "time: 1s\nmemory: 256m\nsubtasks: [{score: 100, n_cases: 3}]\n",
            3,
            **{"chk.cc": "int main() {}\n"},
        )
    )
    assert [(t.name, t.sample) for t in three.spec.tests] == [("1", True), ("2", False), ("3", False)]
    # The public case is shown before the first submission: in the statement and the workspace.
    sample_in = (tmp_path / "three" / "testdata" / "1.in").read_bytes()
    assert three.files["workspace/samples/1.in"].read_bytes() == sample_in
    assert "## Sample 1" in three.statement and sample_in.decode().strip() in three.statement
    assert not any(k.startswith("workspace/") for k in problem.files)  # one case: hidden, never shown
    # The case arex picks as a sample equals hidden cases (a real Frontier-CS problem does this):
    # it is not the package's public data, so the sample goes and every hidden case stays.
    same = frontier(
        tmp_path / "same",
        "time: 1s\nmemory: 256m\nsubtasks: [{score: 100, n_cases: 3}]\n",
        3,
        **{"chk.cc": "int main() {}\n"},
    )
    (same / "testdata" / "2.in").write_text("1\n")
    loaded = only(same)
    assert [(t.name, t.sample) for t in loaded.spec.tests] == [("2", False), ("3", False)]
    assert "## Sample" not in loaded.statement and not any(k.startswith("workspace/") for k in loaded.files)


def test_frontier_interactive_and_explicit_cases(tmp_path):
    config = (
        "type: interactive\ninteractor: interactor.cpp\ntime: 2s\nmemory: 512m\n"
        "subtasks:\n  - score: 100\n    cases: [{input: a.in, output: a.out}, {input: b.in, output: b.ans}]\n"
    )
    root = write(tmp_path / "p", {"config.yaml": config, "statement.txt": "Guess.\n", "interactor.cpp": CHECKER,
                                  "testlib.h": "//\n", "testdata/a.in": "1\n", "testdata/a.ans": "1\n",
                                  "testdata/b.in": "2\n", "testdata/b.ans": "2\n"})  # fmt: skip
    problem = only(root)
    checker = problem.spec.checker
    assert (checker.kind, checker.protocol, checker.source) == ("interactive", "testlib", "checker/interactor.cpp")
    assert {"private/checker/interactor.cpp", "private/checker/testlib.h"} <= set(problem.files)
    # a.out read as a.ans, as Frontier-CS's judge does
    assert problem.files["private/tests/1.ans"] == root / "testdata" / "a.ans"
    (root / "interactor.cpp").rename(root / "other.cpp")
    with pytest.raises(SourceError, match=r"config\.yaml: field 'interactor': interactor\.cpp does not exist"):
        load(root)
    write(root, {"config.yaml": "type: leetcode\ntime: 1s\nmemory: 1m\nsubtasks: []\n"})
    with pytest.raises(
        SourceError, match=r"field 'type': only 'default' and 'interactive' problems are supported, got 'leetcode'"
    ):
        load(root)


def test_frontier_checker_outside_the_problem_is_refused(tmp_path):
    write(tmp_path, {"secret.cc": "int main() {}\n"})
    root = frontier(tmp_path / "p", "time: 1s\nmemory: 256m\nchecker: ../secret.cc\nsubtasks: [{n_cases: 2}]\n", 2)
    with pytest.raises(SourceError, match=r"key 'checker' names '\.\./secret\.cc', which climbs out of the folder"):
        load(root)


# -- a sample equal to a hidden test (every format) ----------------------------------------------
def test_a_hidden_test_equal_to_a_sample_leaves_the_hidden_set(tmp_path):
    # Public data is not held out: the sample keeps its feedback, the hidden copy stops counting.
    root = kattis(
        tmp_path / "k",
        **{
            "data/secret/1.in": "1 2\n",
            "data/secret/1.ans": "3\n",
            "data/secret/2.in": "5 5\n",
            "data/secret/2.ans": "10\n",
        },
    )
    problem = only(root)
    assert [(t.name, t.sample) for t in problem.spec.tests] == [("sample__1", True), ("secret__2", False)]
    assert not any(k.startswith("private/tests/secret__1") for k in problem.files)
    assert "## Sample 1" in problem.statement
    row = {"name": "A", "description": "d", "public_tests": {"input": ["1\n", "9\n"], "output": ["1\n", "9\n"]},
           "private_tests": {"input": ["1\n", "7\n"], "output": ["1\n", "7\n"]}}  # fmt: skip
    rows = write(tmp_path, {"rows.json": json.dumps(row)}) / "rows.json"
    assert [(t.name, t.sample) for t in only(rows).spec.tests] == [
        ("public-001", True),
        ("public-002", True),
        ("private-002", False),
    ]
    own = write(tmp_path / "own", {"task.yaml": "id: own\ntitle: Own\ntime_limit_s: 1\n", "statement.md": "s\n",
                                   "private/tests/sample-1.in": "4\n", "private/tests/sample-1.ans": "4\n",
                                   "private/tests/main-1.in": "4\n", "private/tests/main-1.ans": "4\n"})  # fmt: skip
    with pytest.raises(SourceError, match="every hidden test is a copy of a sample"):
        load(own)


# -- CodeContests --------------------------------------------------------------------------------
def cc_row(**fields) -> dict:
    return {
        "name": "1_A. Rows",
        "description": "Print the input.",
        "public_tests": {"input": ["1\n"], "output": ["1\n"]},
        "private_tests": {"input": ["2\n"], "output": ["2\n"]},
        **fields,
    }


@pytest.mark.parametrize(
    ("outputs", "kind"),
    [
        (["0.5\n", "2.25 3\n"], "float"),
        (["1\n", "2\n"], "token"),
        (["1.5\n", "YES\n"], "token"),
        (["1e-3\n", "2\n"], "token"),
    ],
)
def test_codecontests_float_answers_get_a_tolerant_checker(tmp_path, outputs, kind):
    row = cc_row(
        public_tests={"input": ["a\n"], "output": [outputs[0]]},
        private_tests={"input": ["b\n"], "output": [outputs[1]]},
    )
    checker = only(write(tmp_path, {"r.json": json.dumps(row)}) / "r.json").spec.checker
    assert checker.kind == kind
    if kind == "float":
        assert (checker.abs_tol, checker.rel_tol) == (1e-6, 1e-6)


@pytest.mark.parametrize(
    ("limit", "mb"), [(256000000, 256), (256 << 20, 256), (64 * 10**6, 64), (None, 256), (300 * 2**20 + 1, 301)]
)
def test_codecontests_memory_in_the_rows_units(tmp_path, limit, mb):
    row = cc_row(memory_limit_bytes=limit)
    assert only(write(tmp_path, {"r.json": json.dumps(row)}) / "r.json").spec.memory_mb == mb


def test_codecontests_keeps_every_runnable_solution(tmp_path):
    codes = [ADD_PY, "print 1\n", "int main(){}", "class A { public static void main(String[] a) {} }", "?"]
    row = cc_row(
        solutions={"language": [3, 1, 2, 4, 0], "solution": codes},
        incorrect_solutions={"language": [3, 3, 3], "solution": ["print(0)\n"] * 3},
    )
    problem = only(write(tmp_path, {"r.json": json.dumps(row)}) / "r.json")
    java = any(".java" in lang.extensions for lang in LANGUAGES.values())
    accepted = [s.path for s in problem.spec.solutions if s.expected == "accepted"]
    assert accepted == ["solutions/accepted-0.py", "solutions/accepted-2.cpp"] + (
        ["solutions/accepted-3.java"] if java else []
    )
    assert len([s for s in problem.spec.solutions if s.expected == "wrong_answer"]) == 3  # all, not two
    assert ("solutions.solution.1", "accepted", "python2") in problem.skipped
    assert ("solutions.solution.4", "accepted", "language unknown") in problem.skipped
    assert all(problem.files[s.path] for s in problem.spec.solutions)
    assert problem.files["workspace/samples/1.in"] == b"1\n"  # public tests: the workspace's samples


def test_jsonl_errors_name_the_line(tmp_path):
    good = json.dumps(cc_row())
    bad_row = json.dumps(cc_row(public_tests={"input": ["1"], "output": []}))
    path = write(tmp_path, {"rows.jsonl": f"{good}\n\n{bad_row}\n"}) / "rows.jsonl"
    with pytest.raises(SourceError, match=r"rows\.jsonl line 3: field 'public_tests': 1 inputs but 0 outputs"):
        load(path)
    path.write_text(f"{good}\n\n\n{{not json\n")
    with pytest.raises(SourceError, match=r"rows\.jsonl: not valid JSON \(line 4: "):
        load(path)
    path.write_text(f"{good}\n[1, 2]\n")
    with pytest.raises(SourceError, match=r"rows\.jsonl line 2: must be a JSON object"):
        load(path)


# -- the corpus packages load as their expect.yaml says ------------------------------------------
def test_corpus_packages_load_as_expected():
    assert only(CORPUS / "kattis-legacy").time_multiplier == 3.0
    legacy = only(CORPUS / "kattis-legacy")
    assert legacy.statement.startswith("# Ribbon Cutting\n") and "\\" not in legacy.statement.split("## Sample 1")[
        0
    ].replace("\\le", "")
    modern = only(CORPUS / "kattis-2023")
    assert (modern.spec.checker.kind, modern.spec.checker.abs_tol) == ("float", 1e-6)  # output_validator_args
    assert {s.expected for s in modern.spec.solutions} == {"accepted", "wrong_answer", "run_time_error"}
    single = only(CORPUS / "frontier-single-case")
    assert not any(t.sample for t in single.spec.tests)
    rows = only(CORPUS / "codecontests-float" / "rows.jsonl")
    assert (
        rows.spec.checker.kind == "float"
        and rows.skipped_summary("accepted") == "1 accepted submission skipped (python2)"
    )
    # The loader alone does not generate (the build runs the generators first: judge_generate).
    for name, reason in (("kattis-multipass", "multi-pass"), ("kattis-generators", "tests are generated")):
        with pytest.raises(SourceError, match=reason):
            load(CORPUS / name)
