"""The Frontier-CS algorithmic track (`arex eval frontier-cs FOLDER`), scored as its judge scores it.

FOLDER is a Frontier-CS clone, its `algorithmic/` folder or `algorithmic/problems/`; every
`problems/<id>/` folder is a problem, read by arex's Frontier-CS importer
(arex.envs.sources.frontier: statement, limits, test cases, checker or interactor) and written as an
env under the eval's `envs/` (no validation gates: the benchmark's problems are taken as shipped,
and no candidate solution goes into the env). A problem the importer refuses (its test data absent,
a type arex does not run) is listed with the reason, never dropped.

Score of one graded submission, as the benchmark's judge computes it from the checker's messages:
for each of the problem's n test cases (every case of config.yaml, the first one included),

- bounded ratio r_i: the number after `Ratio:` in the checker's message, else 1 if the checker
  accepted the output and 0 if not (a run that failed, a compile error: 0); kept in [0, 1];
- unbounded ratio u_i: the number after `RatioUnbounded:`, else r_i;

score = 100 · (r_1 + ... + r_n) / n, unbounded score = 100 · (u_1 + ... + u_n) / n.

The agent's reward on a problem (the benchmark's agent protocol): the better of its final graded
submission and its best graded submission, over the rounds played; a rollout with no graded
submission scores 0. A round whose grading failed for the infrastructure is not a graded submission.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path, PurePosixPath

from arex.envs.judge_build import write_env
from arex.envs.runtime import Env
from arex.envs.sources.common import Problem, SourceError
from arex.envs.sources.frontier import load_frontier
from arex.errors import UserInputError
from arex.eval.base import Benchmark, Item, Score, Source
from arex.record.trajectory import RoundEnd
from arex.specs import GradeResult


class FrontierCS(Benchmark):
    name = "frontier-cs"
    score_name = "score (0-100)"

    def problems(self, source: Source) -> list[Item]:
        root = problems_folder(source.folder)
        folders = sorted((p for p in root.iterdir() if _is_problem(p)), key=_by_number)
        if source.only:
            unknown = sorted(set(source.only) - {p.name for p in folders})
            if unknown:
                raise UserInputError(
                    f"--problems: {', '.join(unknown)} not found in {root} (problem folders are named by id)"
                )
            folders = [p for p in folders if p.name in source.only]
        items = []
        for folder in folders:
            try:
                problem = load_frontier(folder, candidates=0)  # the env carries no candidate solutions
            except SourceError as exc:
                source.notify(f"problem {folder.name} is not evaluated: {exc}")
                items.append(Item(folder.name, None, str(exc)))
                continue
            problem = judged_as_shipped(problem)
            dest = source.envs / problem.spec.id
            write_env(problem, dest)  # the same problem writes the same folder: a re-run resumes
            items.append(Item(folder.name, dest))
        return items

    def score(self, env: Env, rounds: list[RoundEnd]) -> Score:
        n = len(env.spec.tests)
        graded = [(end.round, *case_scores(end.grade, n)) for end in rounds if end.grade.infra_error is None]
        if not graded:
            return Score(0.0, {"unbounded": 0.0, "final": None, "round": None})
        final = graded[-1]
        best = max(graded, key=lambda g: g[1])  # the first of equals
        chosen = final if final[1] >= best[1] else best
        return Score(chosen[1], {"unbounded": chosen[2], "final": final[1], "round": chosen[0]})


SHIM = "arex_eval_checker.cc"
_SHIM = """// arex eval: the problem's checker (or interactor) as Frontier-CS's judge scores it: a case the
// checker does not accept or award points (exit 0 or 7) scores 0, its FAIL (exit 3) included: the
// checker runs in a child process, and any other ending becomes a wrong answer (exit 1).
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <sys/wait.h>
#include <unistd.h>
#define main arex_shipped_main
#include "{name}"
#undef main

template <class F> static int arex_call(F f, int argc, char **argv) {{
    if constexpr (std::is_invocable_v<F, int, char **>) return f(argc, argv); else return f();
}}

int main(int argc, char **argv) {{
    fflush(nullptr);
    pid_t child = fork();
    if (child < 0) _exit(3);  // no child: the judge's failure, never the submission's
    if (child == 0) exit(arex_call(arex_shipped_main, argc, argv));
    int status = 0;
    if (waitpid(child, &status, 0) < 0) _exit(3);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    _exit(code == 0 || code == 7 ? code : 1);  // _exit: no static destructor here (testlib's checks it registered)
}}
"""


def judged_as_shipped(problem: Problem) -> Problem:
    """The problem with its checker (or interactor) wrapped so that a checker FAIL on a submission's
    output is that case's 0, as the benchmark's judge scores it, not a broken env (arex's rule for
    training envs, whose rollouts end on it). A checker that runs out of time is still the judge's."""
    checker = problem.spec.checker
    if checker.source is None:
        return problem
    name = PurePosixPath(checker.source).name
    folder = PurePosixPath(checker.source).parent
    files = {**problem.files, f"private/{folder}/{SHIM}": _SHIM.format(name=name).encode()}
    spec = problem.spec.model_copy(update={"checker": checker.model_copy(update={"source": f"{folder}/{SHIM}"})})
    return dataclasses.replace(problem, spec=spec, files=files)


def case_scores(grade: GradeResult, n: int) -> tuple[float, float]:
    """(score, unbounded score) of one graded submission on a problem of `n` test cases, 0-100: the
    checker's ratios per case as the judge recorded them (details.tests, samples included); a case
    the grading did not reach counts 0."""
    tests = grade.details.get("tests") or []
    if not n:
        return 0.0, 0.0
    bounded = sum(min(max(float(t.get("ratio", 0.0)), 0.0), 1.0) for t in tests)
    unbounded = sum(float(t.get("raw", 0.0)) for t in tests)
    return 100 * bounded / n, 100 * unbounded / n


def problems_folder(folder: Path) -> Path:
    """The folder holding the problem folders; UserInputError if `folder` is not the track."""
    for candidate in (folder / "algorithmic" / "problems", folder / "problems", folder):
        if candidate.is_dir() and any(_is_problem(p) for p in candidate.iterdir()):
            return candidate
    raise UserInputError(
        f"{folder} is not the Frontier-CS algorithmic track: give the clone, its algorithmic/ folder or "
        "algorithmic/problems/ (folders <id>/ with config.yaml and statement.txt)"
    )


def _is_problem(path: Path) -> bool:
    return path.is_dir() and ((path / "config.yaml").is_file() or (path / "statement.txt").is_file())


def _by_number(path: Path) -> tuple:
    return (0, int(path.name), "") if re.fullmatch(r"\d+", path.name) else (1, 0, path.name)
