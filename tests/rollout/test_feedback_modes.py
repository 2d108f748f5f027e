"""`rollout.feedback`: what the agent learns of each graded submission, checked on the bytes the
scripted teacher received.

full: the public score and the grader's whole feedback (today's requests, byte for byte);
score-only: the public score and nothing else; none: no score at all, only that the round ended.
Two small env kinds stand in for a judge problem (sample verdicts, checker messages, hidden-test
counts) and an ML repo (a run log that prints the metric) on the `process` backend, over real HTTP;
one Docker test runs the bundled judge problem. In every mode the record keeps the whole grade."""

import asyncio
import json
import threading
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel
from repo_paths import FIXTURES, REPO

from arex.dataset.export import ExportConfig, export
from arex.envs import runtime
from arex.envs.runtime import Env, Grading, load_env
from arex.errors import UserInputError
from arex.record.snapshots import read_member
from arex.record.trajectory import RoundEnd, load
from arex.rollout.batch import BUNDLED_CONTENT, _hash, config_hash, run_batch
from arex.rollout.config import BUNDLED, RolloutConfig
from arex.sandbox import SandboxConfig
from arex.sandbox.base import BACKENDS
from arex.specs import GradeResult
from arex.teacher.cache import MARK, marked
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)
REFLECT = "Reflect, then write your state update"
PROMPTS_BEFORE = FIXTURES / "prompts" / "before-stable-prefix.yaml"  # the bundled prompts until issue 33
# What only the grader knows: none of it may reach the agent unless the mode is `full`.
JUDGE_MARKS = ("Sample tests:", "sample-2: WA", "checker said", "Hidden tests:", "expected: 7")
ML_MARKS = ("Submission valid", "Run log (tail):", "validation metric", "Public rmse")


class GradedSpec(BaseModel):
    kind: Literal["graded"] = "graded"
    id: str
    title: str
    style: Literal["judge", "ml"] = "judge"
    domain: str = "test"


def public_of(n: float) -> float:
    return round(n / 10 + 0.0137, 4)  # digits that appear nowhere else in a request


def held_out_of(n: float) -> float:
    return round(n / 10 + 0.0271, 4)


class GradedEnv(Env):
    """The score is the number in answer.txt; the grader's feedback looks like a judge's (style
    judge) or like an ML grader's, with the log of the task's own run (style ml)."""

    kind = "graded"
    spec_model = GradedSpec
    submission_path = "answer.txt"

    def _baseline(self, scores: dict) -> float | None:
        return held_out_of(1)

    def prepare(self, sandbox) -> None:
        sandbox.copy_in(self.dir / "workspace", sandbox.config.workdir)

    def _run_task(self, sandbox) -> tuple[GradeResult | None, str]:
        if self.spec.style != "ml":
            return None, ""
        result = sandbox.exec("sh run.sh", timeout=30)
        return None, result.stdout + result.stderr

    def _grade(self, data: bytes, text: str, grading: Grading, log: str) -> GradeResult:
        n = float(text.strip())
        public, held = public_of(n), held_out_of(n)
        if self.spec.style == "ml":
            feedback = (
                f"Submission valid (50 rows). Public rmse: {public:.6f} (lower is better).\nRun log (tail):\n{log}"
            )
        else:
            feedback = (
                f"Sample tests: 1/2 passed (public score {public:.3f}).\n"
                "- sample-1: AC\n- sample-2: WA\n  input: 3 4\n  expected: 7\n"
                "  detail: checker said wrong answer on token 1\n"
                f"Hidden tests: {int(n)} of 9 accepted. Verdicts: AC {int(n)}, WA {9 - int(n)}."
            )
        return GradeResult(public_score=public, held_out_score=held, held_out_raw=held, feedback=feedback)

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        return GradeResult(
            public_score=0.0, held_out_score=0.0, held_out_raw=0.0, feedback=f"Submission not graded: {problem}"
        )

    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        data = read_member(archive, self.submission_path, 1 << 20)
        return self._grade(data, data.decode(), Grading(), "")


@pytest.fixture(autouse=True)
def kinds(monkeypatch):
    monkeypatch.setitem(runtime.KINDS, "graded", GradedEnv)
    monkeypatch.setitem(BACKENDS, "process", "process_sandbox:ProcessSandbox")


def make_env(root: Path, style: str) -> Env:
    (root / "workspace").mkdir(parents=True)
    (root / "task.yaml").write_text(f"kind: graded\nid: graded-{style}\ntitle: Count up\nstyle: {style}\n")
    (root / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt; higher is better.\n")
    (root / "workspace" / "answer.txt").write_text("1\n")
    (root / "workspace" / "run.sh").write_text(
        'echo "epoch 1 loss 0.93"; echo "validation metric: $(cat answer.txt)"\n'
    )
    return load_env(root)


def climbing(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt"]


def rollout(env, store: Path, config: RolloutConfig, script=None, sandbox=None):
    with ScriptedServer(script or RoundScript(climbing), model="scripted-teacher") as server:
        asyncio.run(
            run_batch([env], TEACHER, config, sandbox or SandboxConfig(backend="process"), store, 1, 1, server.base_url)
        )
        requests = list(server.requests)
    [path] = sorted((store / env.id).glob("*.jsonl"))
    return load(path), requests


def text_of(request: dict) -> str:
    """Everything the request carried, as the server received it (tools included)."""
    return json.dumps(request, ensure_ascii=False)


def score_strings(grade: GradeResult) -> set[str]:
    """Every way a score of this grade could be written."""
    out = set()
    for score in (grade.public_score, grade.held_out_score):
        out |= {f"{score:.6g}", f"{score:.3f}", f"{score:.4g}", f"{score:.6f}"}
    return out


def reflect_requests(requests: list[dict]) -> list[dict]:
    return [r for r in requests if REFLECT in r["messages"][-1]["content"]]


def round_headers(requests: list[dict]) -> dict[int, str]:
    """Round number → the round header the round's first call carried."""
    out = {}
    for r in requests:
        last_header = [
            m["content"] for m in r["messages"] if m["role"] == "user" and m["content"].startswith("Round ")
        ][-1]
        out.setdefault(int(last_header.split()[1]), last_header)
    return out


def check_record(t, requests: list[dict], mode: str, marks: tuple[str, ...]) -> None:
    """The record keeps the whole grade; its `feedback` is what the agent saw; every request is
    rebuilt from the record exactly."""
    assert t.header.config["feedback"] == mode and t.end.status == "done"
    assert [r.end.grade.held_out_score for r in t.rounds] == [held_out_of(n + 1) for n in (1, 2, 3)]
    assert all(any(m in r.end.grade.feedback for m in marks) for r in t.rounds)  # the grader's full text, kept
    assert t.end.best.round == 3 and t.end.best.held_out == held_out_of(4)
    reflects = reflect_requests(requests)
    assert [r.end.feedback in q["messages"][-1]["content"] for r, q in zip(t.rounds, reflects)] == [True] * 3
    rebuilt = [r.messages(i) for r in t.rounds for i in range(len(r.steps))] + [r.messages(None) for r in t.rounds]
    assert sorted(json.dumps(m) for m in rebuilt) == sorted(json.dumps(q["messages"]) for q in requests)


def check_shown(t, requests: list[dict], mode: str, marks: tuple[str, ...]) -> None:
    """What the agent was shown in each mode, over every call: acting, reflecting, the next round."""
    everything = "\n".join(text_of(r) for r in requests)
    headers, reflects = round_headers(requests), reflect_requests(requests)
    assert len(reflects) == 3 and sorted(headers) == [1, 2, 3]
    assert not [r.held_out for r in t.rounds if f"{r.held_out:.4f}" in everything]  # held-out scores: never shown
    if mode == "full":
        assert all(m in everything for m in marks)
        assert (
            "Public score: 0.2137" in reflects[0]["messages"][-1]["content"]
            and marks[0] in reflects[0]["messages"][-1]["content"]
        )
        assert "public score 0.3137 in round 2" in headers[3] and marks[0] in headers[2]
        return
    assert not [m for m in marks if m in everything], mode
    if mode == "score-only":
        assert [r.end.feedback for r in t.rounds] == [
            "Public score: 0.2137",
            "Public score: 0.3137",
            "Public score: 0.4137",
        ]
        assert "Public score: 0.2137" in reflects[0]["messages"][-1]["content"]
        assert "Feedback on your last submission (round 2):\nPublic score: 0.3137" in headers[3]
        assert "Best so far: public score 0.3137 in round 2" in headers[3]
        assert "its public score and nothing else" in requests[0]["messages"][0]["content"]  # the system prompt says so
        return
    leaked = sorted(s for r in t.rounds for s in score_strings(r.end.grade) if s in everything)
    assert leaked == [], leaked
    # (skills may speak of public scores)
    assert "Public score:" not in everything and "Best so far: public score" not in everything
    assert all(r.end.best_public is None for r in t.rounds)
    assert all("No score or test results are shown" in h for n, h in headers.items() if n > 1)
    assert all("Best so far: not shown in this run" in h for h in headers.values())
    assert all("judge your work with your own tests" in q["messages"][-1]["content"] for q in reflects)
    assert "graded in private" in requests[0]["messages"][0]["content"]


MODES = ["full", "score-only", "none"]


@pytest.mark.parametrize("action_format", ["text", "tools"])
@pytest.mark.parametrize("context", ["bounded", "full-history"])
@pytest.mark.parametrize("mode", MODES)
def test_judge_style_feedback_reaches_the_agent_only_as_the_mode_allows(tmp_path, mode, context, action_format):
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    config = RolloutConfig(rounds=3, feedback=mode, context=context, action_format=action_format)
    t, requests = rollout(env, tmp_path / "store", config)
    check_record(t, requests, mode, JUDGE_MARKS)
    check_shown(t, requests, mode, JUDGE_MARKS)
    if context == "full-history":  # round 3 carries rounds 1 and 2 whole: still nothing more than the mode allows
        assert (
            len(reflects := reflect_requests(requests)) == 3
            and len(reflects[2]["messages"]) > len(reflects[0]["messages"]) + 4
        )


@pytest.mark.parametrize("mode", MODES)
def test_ml_style_run_log_and_metric_reach_the_agent_only_in_full(tmp_path, mode):
    env = make_env(tmp_path / "envs" / "graded-ml", "ml")
    t, requests = rollout(env, tmp_path / "store", RolloutConfig(rounds=3, feedback=mode))
    check_record(t, requests, mode, ML_MARKS)
    check_shown(t, requests, mode, ML_MARKS)
    assert "validation metric: 2" in t.rounds[0].end.grade.feedback  # the task's own run, logged by the grader


def test_full_mode_requests_are_the_ones_arex_sent_before_modes_existed(tmp_path):
    """Texts made by the code before `rollout.feedback` (same env, same script), pinned: the prompts
    file of then (bundled until the stable prefix came first) still gives them, byte for byte."""
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    t, requests = rollout(env, tmp_path / "store", RolloutConfig(rounds=3, prompts=str(PROMPTS_BEFORE)))
    first_feedback = (
        "Public score: 0.2137\nSample tests: 1/2 passed (public score 0.214).\n"
        "- sample-1: AC\n- sample-2: WA\n  input: 3 4\n  expected: 7\n"
        "  detail: checker said wrong answer on token 1\nHidden tests: 2 of 9 accepted. Verdicts: AC 2, WA 7."
    )
    reflect = (
        f"Your submission for round 1 was graded.\n{first_feedback}\n\n"
        "Reflect, then write your state update. Use exactly these headings:\n"
        "REVIEW: quote what failed or what the feedback says (verdicts, errors, metric).\nDIAGNOSE: why it happened.\n"
        "PLAN: the smallest change that should improve the score next round.\n"
        "STATE: what you learned, the best score and solution so far and where it lives, what to try\n"
        "next, what not to repeat. Keep it under 150 words: it is all you will remember.\n"
    )
    header = (
        "Round 2 of 3.\nYour state update from the last round:\nafter round 1, keep the best solution in place.\n"
        "Best so far: public score 0.2137 in round 1\n"
        f"Feedback on your last submission (round 1):\n{first_feedback}\n"
        "Continue improving. One command per reply; `submit` when ready.\n"
    )
    assert reflect_requests(requests)[0]["messages"][-1]["content"] == reflect
    assert round_headers(requests)[2] == header
    assert t.rounds[0].end.feedback == first_feedback and t.rounds[0].end.reflect_prompt == reflect
    assert "Feedback in this run" not in requests[0]["messages"][0]["content"]  # the system prompt as it was
    assert "exactly these headings" not in requests[0]["messages"][0]["content"]


def test_bundled_prompts_put_what_never_changes_first_and_keep_each_rounds_message_to_what_changes(tmp_path):
    """Every request of a rollout begins with the same system prompt (how to reflect and the mode's
    rules included); a round's own message holds only its number, the state, the best score and the
    last feedback; the reflection request adds only the feedback and one line."""
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    for mode in MODES:
        t, requests = rollout(env, tmp_path / f"store-{mode}", RolloutConfig(rounds=3, feedback=mode))
        system = {r["messages"][0]["content"] for r in requests}
        assert len(system) == 1 and all(r["messages"][0]["role"] == "system" for r in requests)
        [text] = system
        assert "Reply with exactly these headings" in text and "STATE:" in text
        assert ("Feedback in this run" in text) == (mode != "full")
        assert text.index("exactly these headings") < text.index("# Task: ")  # the task comes last
        header = round_headers(requests)[2]
        state = "Your state update from the last round:\nafter round 1, keep the best solution in place.\n"
        assert header.startswith("Round 2 of 3.\n" + state) and "Continue improving" not in header
        feedback = t.rounds[0].end.feedback
        assert header.endswith(feedback.strip() + "\n")
        reflect = reflect_requests(requests)[0]["messages"][-1]["content"]
        assert feedback in reflect and reflect.endswith("\nReflect, then write your state update.\n")
        assert len(reflect.replace(feedback, "")) < 100 and "REVIEW" not in reflect


def test_the_mode_is_part_of_the_rollout_key_and_full_keeps_old_keys():
    base = RolloutConfig(rounds=2)
    sampling = TEACHER.model_dump(include={"model", "temperature", "top_p", "max_tokens", "seed", "stop", "extra_body"})
    # The settings added since the key was defined (each left out at its default).
    later = {"action_format", "feedback", "general_skills", "task_skills", "docs", "grading_containers"}
    later |= {"reflection_words", "reflection_tokens"}
    # The bundled prompts changed since the key was defined (issue 33: what never changes first), so their
    # content is keyed: rollouts made under the earlier bundled prompts are not resumed under these.
    content = {"prompts": base.content()["prompts"]}
    assert content["prompts"] != BUNDLED_CONTENT["prompts"]
    before = _hash({"teacher": sampling, "rollout": base.model_dump(exclude=later), "content": content})
    assert config_hash(TEACHER, base) == before
    # the grading cap changes no trajectory; rollouts made before the setting existed keep their keys
    assert config_hash(TEACHER, RolloutConfig(rounds=2, grading_containers=1)) == before
    hashes = {config_hash(TEACHER, RolloutConfig(rounds=2, feedback=m)) for m in MODES}
    assert len(hashes) == 3


def test_a_resumed_rollout_continues_in_its_mode(tmp_path):
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    store, config = tmp_path / "store", RolloutConfig(rounds=3, feedback="none")
    reached, release = threading.Event(), threading.Event()
    script = RoundScript(climbing)

    def stall_in_round_3(request, index):
        if "Round 3 of 3" in request["messages"][-1]["content"]:
            reached.set()
            release.wait(60)
        return script(request, index)

    async def stop_in_round_3(base_url: str) -> None:
        task = asyncio.ensure_future(
            run_batch([env], TEACHER, config, SandboxConfig(backend="process"), store, 1, 1, base_url)
        )
        while not reached.is_set() and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with ScriptedServer(stall_in_round_3, model="scripted-teacher") as server:
        try:
            asyncio.run(stop_in_round_3(server.base_url))
        finally:
            release.set()
    t, requests = rollout(env, store, config)
    assert [r.number for r in t.rounds] == [1, 2, 3] and t.end.status == "done"
    assert requests and all(
        REFLECT not in r["messages"][-1]["content"]
        or r["messages"][-1]["content"].startswith("Your submission for round 3 was recorded")
        for r in requests
    )
    everything = "\n".join(text_of(r) for r in requests)
    leaked = sorted(s for r in t.rounds for s in score_strings(r.end.grade) if s in everything)
    assert leaked == [] and "Best so far: not shown in this run" in everything and "graded in private" in everything
    assert t.rounds[2].end.grade.held_out_score == held_out_of(4)


def test_export_rows_hold_only_what_the_agent_was_shown(tmp_path):
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    t, _ = rollout(env, tmp_path / "store", RolloutConfig(rounds=3, feedback="none", context="full-history"))
    export(iter([t.path]), tmp_path / "dataset", ExportConfig(), env.dir.parent)
    for granularity in ("rounds", "trajectories"):
        rows = pq.read_table(next((tmp_path / "dataset" / granularity).glob("*.parquet"))).to_pylist()
        text = json.dumps([row["messages"] for row in rows])
        assert rows and not [m for m in JUDGE_MARKS if m in text]
        assert not [s for r in t.rounds for s in score_strings(r.end.grade) if s in text]
        # metadata keeps the grade
        assert {row["held_out_score"] for row in rows} <= {held_out_of(n) for n in (2, 3, 4)}


def test_a_prompts_file_without_a_modes_prompts_names_them(tmp_path):
    bundled = (BUNDLED / "prompts" / "default.yaml").read_text()
    older = tmp_path / "older.yaml"  # a prompts file written before the modes: no *_none, *_score_only keys
    older.write_text("\n".join(line for line in bundled.split("\n# Feedback modes")[0].splitlines()) + "\n")
    assert RolloutConfig(prompts=str(older)).load_prompts()["reflect"]  # full mode: loads as it did
    with pytest.raises(UserInputError) as info:
        RolloutConfig(prompts=str(older), feedback="none").load_prompts()
    message = str(info.value)
    assert "best_none" in message and "reflect_none" in message and "rollout.feedback: none" in message
    with pytest.raises(UserInputError, match="reflect_score_only"):
        RolloutConfig(prompts=str(older), feedback="score-only").load_prompts()


# -- the bundled judge problem, graded in Docker ---------------------------------------------------
PAIR_SUMS = REPO / "envs" / "judge-pair-sums"
GRADER_LINES = (
    "Sample tests:",
    "Hidden tests:",
    "Slowest hidden test",
    "- sample-1:",
    "expected:",
    "Compilation failed",
)


@pytest.fixture(scope="module")
def pair_sums(tmp_path_factory) -> Path:
    from arex.envs.build import write_env
    from arex.envs.judge_sources import load as load_source

    folder = tmp_path_factory.mktemp("envs") / "pair-sums"
    write_env(load_source(PAIR_SUMS)[0], folder)
    return folder


@pytest.mark.docker
@pytest.mark.parametrize(
    "mode, context, action_format", [("score-only", "full-history", "tools"), ("none", "bounded", "text")]
)
def test_a_real_judge_problem_shows_no_verdicts_outside_full(pair_sums, tmp_path, mode, context, action_format):
    wrong = (PAIR_SUMS / "solutions" / "off_by_one.cpp").read_text()
    starter = (PAIR_SUMS / "workspace" / "solution.cpp").read_text()
    script = RoundScript(lambda n: [f"cat > solution.cpp <<'EOF'\n{wrong if n == 1 else starter}EOF"])
    config = RolloutConfig(rounds=2, feedback=mode, context=context, action_format=action_format)
    t, requests = rollout(load_env(pair_sums), tmp_path / "store", config, script, SandboxConfig())
    assert t.end.status == "done" and t.header.config["feedback"] == mode
    grades = [r.end.grade for r in t.rounds]
    # WA everywhere; the quadratic starter
    assert [g.held_out_score for g in grades] == [0.0, 0.3] and [g.public_score for g in grades] == [
        0.0,
        1.0,
    ]
    # the record keeps the grader's text
    assert "- sample-1: WA" in grades[0].feedback and "Hidden tests:" in grades[1].feedback
    everything = "\n".join(text_of(r) for r in requests)
    assert not [line for line in GRADER_LINES if line in everything]
    if mode == "score-only":
        assert [r.end.feedback for r in t.rounds] == ["Public score: 0", "Public score: 1"]
        # round 2's best is told in round 3, which there is not
        assert "Best so far: public score 1 in round 2" not in everything
        assert (
            "Public score: 0" in round_headers(requests)[2]
            and "Public score: 1" in reflect_requests(requests)[1]["messages"][-1]["content"]
        )
    else:
        assert (
            "Public score" not in everything
            and "Best so far: public" not in everything
            and all(r.end.best_public is None for r in t.rounds)
        )


def test_the_reflection_length_budget_reaches_the_prompt_and_max_tokens_of_reflections_only(tmp_path):
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    config = RolloutConfig(rounds=2, reflection_words=40, reflection_tokens=77)
    t, requests = rollout(env, tmp_path / "store", config)
    reflects = reflect_requests(requests)
    assert len(reflects) == 2 and {r["max_tokens"] for r in reflects} == {77}
    assert {r["max_tokens"] for r in requests if r not in reflects} == {TEACHER.max_tokens}
    assert "Keep it under 40 words" in requests[0]["messages"][0]["content"]
    assert [r.end.reflection.call.sampling["max_tokens"] for r in t.rounds] == [77, 77]  # on the record
    assert config_hash(TEACHER, config) != config_hash(TEACHER, RolloutConfig(rounds=2))


def test_cache_breakpoints_mark_the_requests_only_when_asked_and_the_record_rebuilds_them(tmp_path):
    """teacher.cache_breakpoints: the scripted server receives `cache_control` on the system prompt and
    the last message of every request, and the record rebuilds each request as sent; off, the requests
    are the unmarked ones, byte for byte, and the record is written as before."""
    env = make_env(tmp_path / "envs" / "graded-judge", "judge")
    sent, cached = {}, {}
    for on in (False, True):
        teacher = TEACHER.model_copy(update={"cache_breakpoints": on})
        store = tmp_path / f"store-{on}"
        with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
            asyncio.run(
                run_batch(
                    [env], teacher, RolloutConfig(rounds=2), SandboxConfig(backend="process"), store, 1, 1,
                    server.base_url,
                )
            )  # fmt: skip
            sent[on], cached[on] = list(server.requests), server.stats["cached_tokens"]
        [path] = sorted((store / env.id).glob("*.jsonl"))
        t = load(path)
        rebuilt = [r.messages(i) for r in t.rounds for i in [*range(len(r.steps)), None]]
        wire = [marked(m) for m in rebuilt] if on else rebuilt
        assert [json.dumps(m) for m in wire] == [json.dumps(r["messages"]) for r in sent[on]]
        assert t.header.cache_breakpoints is on and t.header.schema_version == (3 if on else 2)
        assert ("cache_breakpoints" in path.read_text().splitlines()[0]) is on
    plain, marks = sent[False], sent[True]
    assert cached[True] == cached[False] > 0  # the server's cache matches content, marks or not
    assert len(plain) == len(marks) and "cache_control" not in json.dumps(plain)
    for a, b in zip(plain, marks):
        first, last = b["messages"][0], b["messages"][-1]
        assert first["content"] == [{"type": "text", "text": a["messages"][0]["content"], "cache_control": MARK}]
        assert last["content"] == [{"type": "text", "text": a["messages"][-1]["content"], "cache_control": MARK}]
        assert b["messages"][1:-1] == a["messages"][1:-1]  # nothing else is touched
        assert {k: v for k, v in b.items() if k != "messages"} == {k: v for k, v in a.items() if k != "messages"}
