"""The report's statistics do not mislead (issue 32): envs with different metrics are only averaged
normalised; a rollout that stops early carries its best forward (no survivorship dip); an invalid ML
submission (the metric's worst value, -1e6, recorded) shows as "invalid submission", off the scale;
an env that graded nothing says so; the trajectory table says kept or dropped, and why; the headline
is the test-time scaling curve. A real run: the scripted teacher over HTTP, the process backend, two
env kinds written here on tests/loop_kit.py's tally; rendered in headless Chromium."""

import asyncio
import json
from typing import Literal

import pytest
from loop_kit import PROCESS_BACKEND, TEACHER, TallyEnv, TallySpec, process_sandbox
from test_report import Elements, Tables, chromium

from arex.envs import runtime
from arex.envs.runtime import load_env
from arex.report import write_report
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import BACKENDS
from arex.selection.selector import SelectConfig, select
from arex.specs import GradeResult
from arex.teacher.scripted import RoundScript, ScriptedServer


class ErrorSpec(TallySpec):
    kind: Literal["error"] = "error"


class ErrorEnv(TallyEnv):
    """An RMSE-like env (minimised, negated): held-out = -10 × answer; "oops" is an invalid submission
    graded as the ML grader grades one (the metric's worst value and details["invalid"])."""

    kind = "error"
    spec_model = ErrorSpec

    def _grade(self, data, text, grading, log):
        if text.strip() == "oops":
            return GradeResult(
                public_score=-1e6,
                held_out_score=-1e6,
                held_out_raw=1e6,
                feedback="invalid submission: not a number",
                details={"kind": "ml", "metric": "rmse", "invalid": "not a number"},
            )
        value = -10 * float(text.strip())
        return GradeResult(
            public_score=value, held_out_score=value, held_out_raw=-value, feedback="ok", details={"metric": "rmse"}
        )


def script(n: int) -> list[str]:
    return [{1: "echo oops > answer.txt", 2: "echo 3 > answer.txt", 3: "echo 1 > answer.txt"}[n]]


def climbing(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt"]


def make_env(root, env_id: str, kind: str):
    folder = root / env_id
    (folder / "workspace").mkdir(parents=True)
    (folder / "task.yaml").write_text(f"kind: {kind}\nid: {env_id}\ntitle: t\n")
    (folder / "statement.md").write_text("Write a number in answer.txt.\n")
    (folder / "workspace" / "answer.txt").write_text("1\n")
    (folder / "workspace" / "rules.txt").write_text("do not edit\n")
    if kind == "tally":  # a build stamp: the tally baseline (0.1) is recorded in the header
        (folder / ".build.json").write_text('{"scores": {}}')
    return load_env(folder)


def run(envs, rounds_script, store, config, samples=1):
    with ScriptedServer(rounds_script, model="scripted-teacher") as server:
        asyncio.run(run_batch(envs, TEACHER, config, process_sandbox(), store, samples, 2, server.base_url))


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    base = tmp_path_factory.mktemp("stats")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(runtime.KINDS, "tally", TallyEnv)
        mp.setitem(runtime.KINDS, "error", ErrorEnv)
        mp.setitem(BACKENDS, "process", PROCESS_BACKEND)
        tally = make_env(base / "envs", "count", "tally")
        error = make_env(base / "envs", "regress", "error")
        broken = make_env(base / "envs", "broken", "error")
        store = base / "store"
        run([tally], RoundScript(climbing), store, RolloutConfig(rounds=3))  # 0.2, 0.3, 0.4
        run([tally], RoundScript(lambda n: ["echo 9 > answer.txt"]), store, RolloutConfig(rounds=1))  # stops at 0.9
        run([error], RoundScript(script), store, RolloutConfig(rounds=3))  # invalid, -30, -10
        run([broken], RoundScript(lambda n: ["echo oops > answer.txt"]), store, RolloutConfig(rounds=2))
        select(store, base / "envs", base / "sel", SelectConfig(), process_sandbox())
        result = write_report(store, base / "report", base / "sel")
    return base, result


def test_different_metrics_are_averaged_only_normalised_and_nothing_dips(reported):
    base, result = reported
    [variant] = json.loads(result.json.read_text())["variants"]
    envs = {e["env"]: e for e in variant["envs"]}
    assert envs["regress"]["metric"] == "rmse" and envs["count"]["metric"] == "tally score"
    # count: the 1-round rollout's 0.9 is carried to rounds 2 and 3; the mean does not fall
    assert [round(p["mean"], 6) for p in envs["count"]["best_curve"]] == [0.55, 0.6, 0.65]
    assert [(p["n"], p["ran"]) for p in envs["count"]["best_curve"]] == [(2, 2), (2, 1), (2, 1)]
    # regress: round 1 invalid (no score), then -30, -10; normalised by its own baseline and best
    assert envs["regress"]["invalid"] == 1 and [p["mean"] for p in envs["regress"]["best_curve"]] == [-30.0, -10.0]
    assert envs["broken"]["graded"] == 0 and envs["broken"]["best_curve"] == []
    count = envs["count"]["anchors"]  # recorded baseline 0.1, best known 0.9
    shares = [(0.4 - 0.1) / 0.8, (0.9 - 0.1) / 0.8, 1.0]  # count's two rollouts; regress: best known is its own best
    assert (count["baseline"], count["best_known"]) == pytest.approx((0.1, 0.9))
    assert variant["overall"]["n"] == 3 and variant["overall"]["mean"] == pytest.approx(sum(shares) / 3)
    assert all(-1 <= p["mean"] <= 1 for p in variant["scaling"])  # never a raw mean of RMSE and a share
    means = [p["mean"] for p in variant["scaling"]]
    assert means == sorted(means) and [p["round"] for p in variant["scaling"]] == [1, 2, 3]
    cells = Tables(result.html.read_text()).tables["stagewise"]
    assert cells[0][-1] == "overall (normalised)" and cells[1][2] == "no graded round"  # envs in name order


@pytest.mark.browser
def test_invalid_submissions_no_graded_env_and_selection_column_are_shown(reported, tmp_path):
    base, result = reported
    dom = Elements(chromium(tmp_path, "--dump-dom", result.html.as_uri()).stdout)
    text = " ".join(dom.text)
    assert "Test-time scaling" in text and "no graded round" in text
    scaling = [a for tag, a, up in dom.found if tag == "circle" and any(u.get("class") == "scaling" for u in up)]
    assert [int(a["data-x"]) for a in scaling] == [1, 2, 3]
    assert not [a for tag, a, _ in dom.found if tag == "figure" and a.get("data-env") == "broken"]
    invalid = [a for tag, a, _ in dom.found if tag == "circle" and a.get("class") == "invalid"]
    assert len(invalid) == 3 and all(a["data-value"] == "invalid" for a in invalid)  # regress 1, broken 2
    assert "-1e+06" not in text and "round 1: invalid submission" in text
    rows = Tables(result.html.read_text()).tables["trajectories"]
    assert rows[0][6] == "selection"
    selection = json.loads((base / "sel" / "selection.json").read_text())
    for row in rows[1:]:
        key = row[2]
        reasons = sorted(r for r, d in selection["drops"].items() if key in d["ids"])
        assert row[6] == ("kept" if key in selection["kept_ids"] else "dropped: " + ", ".join(reasons))
    page = next(p for p in result.pages if "/regress/" in p.as_posix())
    viewer = " ".join(Elements(chromium(tmp_path, "--dump-dom", page.as_uri()).stdout).text)
    assert "held-out invalid submission" in viewer and "step 1: command" in viewer and "step 0" not in viewer
