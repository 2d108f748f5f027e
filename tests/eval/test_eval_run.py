"""`arex eval`'s run on the fast tier: a benchmark adapter written here over the `tally` test kind
(its score: the number the agent leaves, 0-10), the scripted teacher over real HTTP, the process
sandbox. Checks what arex.eval.run computes for every benchmark: the per-problem table, the spread
over samples, the per-round curve, tokens and cost, absent problems listed, resuming, variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_kit import write_tally_env
from typer.testing import CliRunner

from arex import eval as arex_eval
from arex.cli import app
from arex.eval.base import Benchmark, Item, Score, Source
from arex.teacher.scripted import RoundScript, ScriptedServer

# (problem, sample) -> the number the agent leaves in each round.
PLAN = {("a", 0): [4, 2], ("a", 1): [6, 8], ("b", 0): [3, 5], ("b", 1): [2, 3]}
PRICE_IN, PRICE_OUT = 1.0, 2.0  # USD per million tokens


class TallyBench(Benchmark):
    """Problems a and b (tally envs), c absent; the score: the best number left, as a benchmark
    taking the best submission would."""

    name = "tally-bench"
    score_name = "points"

    def problems(self, source: Source) -> list[Item]:
        items = []
        for name in ("a", "b"):
            if not (source.envs / name).is_dir():
                write_tally_env(source.envs, name)
                (source.envs / name / "statement.md").write_text(f"Problem {name}: leave a number in answer.txt.\n")
            items.append(Item(name, source.envs / name))
        return items + [Item("c", None, "its test data is absent")]

    def score(self, env, rounds) -> Score:
        held = [end.grade.held_out_score * 10 for end in rounds]
        return Score(max(held, default=0.0), {"final": held[-1] if held else None})


class PlanScript:
    """Plays PLAN: the problem from the statement in the request, the sample by counting the
    rollouts of that problem begun so far (the first step of round 1 begins one; the run goes one
    rollout at a time: --concurrency 1)."""

    def __init__(self, samples: bool = True):
        self.begun: dict[str, int] = {}
        self.samples = samples
        self.problem = "a"
        self.rounds = RoundScript(lambda n: [f"echo {self._number(n)} > answer.txt"])

    def _number(self, round_: int) -> int:
        sample = self.begun.get(self.problem, 1) - 1 if self.samples else 0
        return PLAN.get((self.problem, sample), [0, 0])[round_ - 1]

    def __call__(self, request: dict, index: int):
        messages = request.get("messages", [])
        self.problem = "a" if "Problem a:" in json.dumps(messages) else "b"
        header = max((i for i, m in enumerate(messages) if _starts_round(m)), default=None)
        if header is not None and messages[header]["content"].startswith("Round 1 of"):
            if not any(m.get("role") == "assistant" for m in messages[header:]):
                self.begun[self.problem] = self.begun.get(self.problem, 0) + 1
        return self.rounds(request, index)


def _starts_round(message: dict) -> bool:
    return message.get("role") == "user" and str(message.get("content", "")).startswith("Round")


@pytest.fixture
def bench(monkeypatch, tally_kind):
    monkeypatch.setitem(arex_eval.BENCHMARKS, "tally-bench", f"{__name__}:TallyBench")


def _eval(folder: Path, out: Path, url: str, *extra: str):
    options = ["-c", "sandbox.backend=process", "-c", f"teacher.base_url={url}", "-c", "teacher.model=scripted-teacher"]
    options += ["-c", "teacher.max_attempts=1"]  # a script's mistake fails the rollout at once
    prices = folder / "prices.yaml"
    prices.write_text(f"teacher:\n  prices:\n    scripted-teacher: {{input: {PRICE_IN}, output: {PRICE_OUT}}}\n")
    options += ["-c", str(prices)]
    args = ["eval", "tally-bench", str(folder), "--out", str(out), "--concurrency", "1", *options, *extra]
    return CliRunner().invoke(app, args)


def test_eval_table_spread_curve_cost_and_resume(bench, tmp_path):
    out = tmp_path / "eval"
    with ScriptedServer(PlanScript(), model="scripted-teacher") as server:
        result = _eval(tmp_path, out, server.base_url, "--samples", "2", "--rounds", "2")
        assert result.exit_code == 0, result.output
        stats = dict(server.stats)
    found = json.loads((out / "eval.json").read_text())
    [v] = found["variants"]
    by_problem = {p["problem"]: p for p in v["problems"]}
    # Each rollout's value is its best number; per problem the mean over samples, with min and max.
    best = {key: max(numbers) for key, numbers in PLAN.items()}
    for name in ("a", "b"):
        values = [best[(name, 0)], best[(name, 1)]]
        assert by_problem[name]["value"] == pytest.approx(sum(values) / 2)
        assert (by_problem[name]["min"], by_problem[name]["max"]) == (min(values), max(values))
        assert by_problem[name]["columns"]["final"] == pytest.approx((PLAN[(name, 0)][-1] + PLAN[(name, 1)][-1]) / 2)
    assert by_problem["c"] == {"problem": "c", "env": None, "status": "absent", "reason": "its test data is absent"}
    assert found["absent"] == [{"problem": "c", "reason": "its test data is absent"}]
    # The headline per sample is the mean over problems; the score the mean over samples, spread their deviation.
    per_sample = [(best[("a", s)] + best[("b", s)]) / 2 for s in (0, 1)]
    assert v["per_sample"] == pytest.approx(per_sample)
    assert v["score"] == pytest.approx(sum(per_sample) / 2)
    assert v["spread"] == pytest.approx(abs(per_sample[0] - per_sample[1]) / 2)
    # The curve: every rollout scored on its first k rounds, best so far.
    after_one = sum(PLAN[(p, s)][0] for p in "ab" for s in (0, 1)) / 4
    assert [c["score"] for c in v["curve"]] == pytest.approx([after_one, v["score"]])
    # Tokens and cost: every call the server answered, priced.
    usage = v["usage"]
    assert usage["prompt_tokens"] == stats["prompt_tokens"] and usage["output_tokens"] == stats["completion_tokens"]
    cost = (stats["prompt_tokens"] * PRICE_IN + stats["completion_tokens"] * PRICE_OUT) / 1e6
    assert usage["cost_usd"] == pytest.approx(cost)
    assert sum(p.get("cost_usd", 0) for p in v["problems"]) == pytest.approx(cost, abs=1e-5)
    md = (out / "eval.md").read_text()
    assert f"**points: {v['score']:.2f}**" in md and "| c | not evaluated |" in md and "its test data is absent" in md

    # A re-run resumes: every rollout is finished, no call is made. A record that cannot be read is left as it
    # is, listed, and counts 0 for its problem and sample (the command exits 2); the others score as before.
    results = json.loads((out / "summary.json").read_text())["results"]
    [line] = [r for r in results if (r["env"], r["sample"]) == ("a", 0)]
    Path(line["path"]).write_bytes(b"\xff not a record\n")
    with ScriptedServer(PlanScript(), model="scripted-teacher") as server:
        again = _eval(tmp_path, out, server.base_url, "--samples", "2", "--rounds", "2")
        assert server.stats["requests"] == 0
    assert again.exit_code == 2 and "could not be read" in again.output
    [after] = json.loads((out / "eval.json").read_text())["variants"]
    assert [(u["env"], u["sample"]) for u in after["unreadable"]] == [("a", 0)]
    a, b = (next(p for p in after["problems"] if p["problem"] == name) for name in "ab")
    assert (a["value"], a["min"], a["rollouts"]) == (pytest.approx(best[("a", 1)] / 2), 0.0, 1)
    assert b == by_problem["b"]


def test_eval_variants_each_scored(bench, tmp_path):
    variants = tmp_path / "variants.yaml"
    variants.write_text("variants:\n  two: [rollout.rounds=2]\n  one: [rollout.rounds=1]\n")
    out = tmp_path / "eval"
    with ScriptedServer(PlanScript(samples=False), model="scripted-teacher") as server:
        result = _eval(tmp_path, out, server.base_url, "--variants", str(variants))
        assert result.exit_code == 0, result.output
    found = {v["name"]: v for v in json.loads((out / "eval.json").read_text())["variants"]}
    assert set(found) == {"two", "one"}
    assert found["two"]["score"] == pytest.approx((max(PLAN[("a", 0)]) + max(PLAN[("b", 0)])) / 2)
    assert found["one"]["score"] == pytest.approx((PLAN[("a", 0)][0] + PLAN[("b", 0)][0]) / 2)
    assert len(found["two"]["curve"]) == 2 and len(found["one"]["curve"]) == 1
    assert (out / "two" / "summary.json").is_file() and (out / "variants.json").is_file()


def test_eval_refuses_what_it_cannot_run(bench, tmp_path):
    runner = CliRunner()
    unknown = runner.invoke(app, ["eval", "no-such-bench", str(tmp_path)])
    assert unknown.exit_code != 0 and "choose one of: " in unknown.output and "frontier-cs" in unknown.output
    missing = runner.invoke(app, ["eval", "tally-bench", str(tmp_path / "nowhere")])
    assert missing.exit_code != 0 and "does not exist" in missing.output
    # An envs/ folder arex eval did not make is never written into.
    (tmp_path / "mine" / "envs").mkdir(parents=True)
    (tmp_path / "mine" / "envs" / "notes.txt").write_text("my own\n")
    taken = runner.invoke(app, ["eval", "tally-bench", str(tmp_path), "--out", str(tmp_path / "mine")])
    assert taken.exit_code == 2 and "was not made by arex eval" in taken.output
    assert sorted(p.name for p in (tmp_path / "mine" / "envs").iterdir()) == ["notes.txt"]
    assert "Traceback" not in unknown.output + missing.output + taken.output
