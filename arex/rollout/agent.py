"""One rollout: one env × one sample × up to R rounds of act → submit → feedback → reflect.

`run()` loops `play_round()`; a round loops `step()`; budgets are checked in one place
(`_over_budget`); every step is appended to the record as it happens, and the record is closed
(with its ending) in `finally`. A re-run resumes from the last complete round.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from arex import __version__
from arex.envs.runtime import Env
from arex.rollout.config import RolloutConfig
from arex.rollout.parse import clip, parse_action, parse_reflection
from arex.rollout.record import SCHEMA_VERSION, RecordWriter, load
from arex.rollout.skills import catalogue
from arex.sandbox import SandboxConfig, SandboxError, make_sandbox
from arex.snapshots import SnapshotStore
from arex.specs import TeacherCall, TeacherIdentity
from arex.teacher.client import TeacherClient, TeacherError

INFRA = "infra_failed"
# Agent sandboxes being started by this process. Each is on its rollout's critical path, so grading
# warm-ups (needed a round later) wait for them rather than compete for the CPU.
_starting = [0]


def _call_record(call: TeacherCall) -> dict:
    return call.model_dump(exclude={"messages"})


class Rollout:
    def __init__(self, env: Env, teacher: TeacherClient, identity: TeacherIdentity, config: RolloutConfig, sandbox: SandboxConfig, path: Path, sample: int, key: str, config_hash: str):
        self.env, self.teacher, self.identity, self.config = env, teacher, identity, config
        self.sandbox_config = env.sandbox_config(sandbox, config.skills_path(), config.skills_target)
        self.path, self.sample, self.key, self.config_hash = path, sample, key, config_hash
        # Workspace archives by sha256; round_end lines name theirs. Never unpacked on the host.
        self.store = SnapshotStore(path.with_suffix("") / "snapshots")
        self.kept: dict[str, str | None] = {"first": None, "best": None, "last": None}
        self.prompts = config.load_prompts()
        self.skills = catalogue(config.skills_path()) or "(none)"
        self.box = None
        self.grading = env.open_grading(sandbox)
        self._warming: asyncio.Future | None = None
        self.writer: RecordWriter | None = None
        # What carries over between rounds:
        self.state = ""
        self.best: dict | None = None  # by held-out score: round, held_out, public
        self.best_public: dict | None = None  # what the agent is told
        self.last_feedback: tuple[int, str] | None = None
        self.history: list[dict] = []  # full-history mode only
        self.tokens = 0
        self.cost = 0.0
        self.started = time.monotonic()
        self.rounds_done = 0
        self.on_round = None  # callback(rollout, round_end) for progress displays

    # -- the loop ------------------------------------------------------------------------------
    async def run(self) -> dict:
        previous = load(self.path)
        if previous.end is not None and previous.end["status"] != INFRA:
            return previous.end
        previous = load(self.path, truncate=True, keep_end=False)  # drop a cut round; redo an infra failure
        self.writer = RecordWriter(self.path)
        status, reason = "done", f"all {self.config.rounds} rounds played"
        try:
            if previous.header is None:
                self.writer.write(self._header())
            self._restore(previous)
            self.box = make_sandbox(self.sandbox_config, f"rollout-{self.env.id}-{self.sample}")
            _starting[0] += 1
            try:
                await asyncio.to_thread(self.box.start)
            finally:
                _starting[0] -= 1
            await asyncio.to_thread(self._prepare_workspace)
            self._warming = asyncio.ensure_future(self._warm_grading())
            for number in range(self.rounds_done + 1, self.config.rounds + 1):
                over = self._over_budget()
                if over:
                    status, reason = "budget", over
                    break
                await self.play_round(number)
        except TeacherError as exc:
            status = INFRA if exc.kind == "unreachable" else ("context_overflow" if exc.kind == "context_length" else "teacher_error")
            reason = str(exc)
        except SandboxError as exc:
            status, reason = INFRA, f"sandbox: {exc}"
        except (asyncio.CancelledError, KeyboardInterrupt):
            status, reason = "interrupted", "stopped by the user; re-run to resume"
            raise
        except Exception as exc:  # noqa: BLE001 - one broken rollout must not stop the batch; it is redone
            status, reason = INFRA, f"unexpected {type(exc).__name__}: {exc}"
        finally:
            end = {"type": "end", "status": status, "reason": reason, "rounds": self.rounds_done, "best": self.best, "tokens": self.tokens, "cost_usd": round(self.cost, 6), "seconds": round(time.monotonic() - self.started, 2)}
            if status != "interrupted":  # an interrupted rollout stays open, to be resumed
                self.writer.write(end)
            self.writer.close()
            if self._warming is not None:
                self._warming.cancel()
            if self.box is not None:
                self.box.stop()  # synchronous: it must run even while the task is being cancelled
            self.grading.close()
        return end

    async def _warm_grading(self) -> None:
        for _ in range(100):  # at most 2 s
            if not _starting[0]:
                break
            await asyncio.sleep(0.02)
        self.grading.warm()

    async def play_round(self, number: int) -> None:
        context = self._round_context(number)
        self.writer.write({"type": "round_start", "round": number, "context": context})
        messages = list(context)
        ending, streak, step = "step_limit", 0, 0
        while step < self.config.steps_per_round:
            over = self._over_budget()
            if over:
                ending = "budget"
                break
            call = await self.teacher.chat(messages)
            self._count(call)
            action = parse_action(call.content) if call.status == "ok" else parse_action("")
            record = {"type": "step", "round": number, "step": step, "call": _call_record(call), "action": action.__dict__, "observation": None, "exec": None}
            messages.append({"role": "assistant", "content": call.content})
            if action.kind == "submit":
                self.writer.write(record)
                ending = "submitted"
                break
            if action.kind == "invalid":
                streak += 1
                record["observation"] = self.prompts["format_error"]
            else:
                streak = 0
                result = await asyncio.to_thread(self.box.exec, action.command, self.config.command_timeout_s)
                record["exec"] = {"status": result.status, "exit_code": result.exit_code, "seconds": result.duration_s}
                record["observation"] = self.prompts["observation"].format(
                    exit_code=result.exit_code, status=result.status, seconds=f"{result.duration_s:.1f}", output=clip(result.stdout + result.stderr, self.config.observation_chars)
                )
            messages.append({"role": "user", "content": record["observation"]})
            self.writer.write(record)
            step += 1
            if streak >= self.config.format_error_streak:
                ending = "format_errors"
                break
        grade, snapshot, submission = await asyncio.to_thread(self.env.grade_round, self.box, self.grading, self.store)
        if grade.infra_error:
            raise SandboxError(f"grading failed: {grade.infra_error}")
        improved = self.best is None or grade.held_out_score > self.best["held_out"]
        feedback = clip(f"Public score: {grade.public_score:.6g}\n{grade.feedback}", self.config.feedback_chars)
        reflect_prompt = self.prompts["reflect"].format(round=number, feedback=feedback)
        messages.append({"role": "user", "content": reflect_prompt})
        reflection_call = await self.teacher.chat(messages)
        self._count(reflection_call)
        reflection = parse_reflection(reflection_call.content if reflection_call.status == "ok" else "")
        if reflection.state:
            self.state = clip(reflection.state, self.config.state_chars)
        messages.append({"role": "assistant", "content": reflection_call.content})
        if improved:
            self.best = {"round": number, "held_out": grade.held_out_score, "public": grade.public_score}
        if self.best_public is None or grade.public_score > self.best_public["public"]:
            self.best_public = {"round": number, "public": grade.public_score}
        self.last_feedback = (number, feedback)
        if self.config.context == "full-history":
            self.history = messages
        self.rounds_done = number
        end = {
            "type": "round_end",
            "round": number,
            "ending": ending,
            "submission": submission,
            "snapshot": snapshot,
            "grade": grade.model_dump(),
            "feedback": feedback,
            "reflect_prompt": reflect_prompt,
            "reflection": {"call": _call_record(reflection_call), **reflection.__dict__},
            "state": self.state,
            "best": self.best,
            "best_public": self.best_public,
        }
        self.writer.write(end)
        self._keep_snapshots(number, snapshot, improved)
        if self.on_round:
            self.on_round(self, end)

    # -- context -------------------------------------------------------------------------------
    def _system(self) -> str:
        return self.prompts["system"].format(
            workdir=self.sandbox_config.workdir,
            timeout=f"{self.config.command_timeout_s:g}",
            steps=self.config.steps_per_round,
            skills_dir=self.config.skills_target,
            skills=self.skills,
            title=self.env.title,
            statement=self.env.statement.strip(),
        )

    def _round_context(self, number: int) -> list[dict]:
        p = self.prompts
        state = p["state"].format(state=self.state) if self.state else p["no_state"]
        best = p["best"].format(best=f"public score {self.best_public['public']:.6g} in round {self.best_public['round']}") if self.best_public else p["no_best"]
        feedback = p["feedback"].format(round=self.last_feedback[0], feedback=self.last_feedback[1]) if self.last_feedback else p["no_feedback"]
        header = {"role": "user", "content": p["round"].format(round=number, rounds=self.config.rounds, state=state.strip(), best=best.strip(), feedback=feedback.strip())}
        if self.config.context == "full-history" and self.history:
            return self.history + [header]
        return [{"role": "system", "content": self._system()}, header]

    # -- budgets, accounting, workspace --------------------------------------------------------
    def _over_budget(self) -> str | None:
        c = self.config
        if c.max_tokens is not None and self.tokens >= c.max_tokens:
            return f"token budget {c.max_tokens} reached ({self.tokens})"
        if c.max_cost_usd is not None and self.cost >= c.max_cost_usd:
            return f"cost budget ${c.max_cost_usd:g} reached (${self.cost:.4f})"
        if c.max_wall_s is not None and time.monotonic() - self.started >= c.max_wall_s:
            return f"wall-time budget {c.max_wall_s:g}s reached"
        return None

    def _count(self, call: TeacherCall) -> None:
        self.tokens += call.prompt_tokens + call.completion_tokens
        self.cost += call.cost_usd

    def _keep_snapshots(self, number: int, snapshot: str | None, improved: bool) -> None:
        """Keep the archives selection re-checks (first, best, last round); drop the others. Only
        after round_end is written: a snapshot counts once its round does."""
        if number == 1:
            self.kept["first"] = snapshot
        if improved:
            self.kept["best"] = snapshot
        if snapshot is not None:
            self.kept["last"] = snapshot
        self.store.prune({sha for sha in self.kept.values() if sha})

    def _prepare_workspace(self) -> None:
        last = self.kept["last"]
        if self.rounds_done and last and self.store.has(last):  # resuming: as the last kept round left it
            self.box.restore(self.store.path(last), self.sandbox_config.workdir)
        else:
            self.env.prepare(self.box)

    def _restore(self, previous) -> None:
        for round_ in previous.rounds:
            end = round_["end"]
            self.rounds_done = end["round"]
            sha = end.get("snapshot")
            if end["round"] == 1:
                self.kept["first"] = sha
            if end["best"] and end["best"]["round"] == end["round"]:
                self.kept["best"] = sha
            if sha:
                self.kept["last"] = sha
            self.state, self.best, self.best_public = end["state"], end["best"], end["best_public"]
            self.last_feedback = (end["round"], end["feedback"])
            for step in round_["steps"]:
                self.tokens += step["call"]["prompt_tokens"] + step["call"]["completion_tokens"]
                self.cost += step["call"]["cost_usd"]
            call = end["reflection"]["call"]
            self.tokens += call["prompt_tokens"] + call["completion_tokens"]
            self.cost += call["cost_usd"]
        if previous.rounds and self.config.context == "full-history":
            from arex.rollout.record import call_messages

            last = previous.rounds[-1]
            self.history = call_messages(last, None) + [{"role": "assistant", "content": last["end"]["reflection"]["call"]["content"]}]

    def _header(self) -> dict:
        return {
            "type": "header",
            "schema_version": SCHEMA_VERSION,
            "key": self.key,
            "env_id": self.env.id,
            "env_kind": self.env.kind,
            "domain": self.env.spec.domain,
            "spec_hash": self.env.spec_hash,
            "sample": self.sample,
            "teacher": self.identity.model_dump(),
            "sampling": self.teacher.sampling(),
            "config_hash": self.config_hash,
            "config": self.config.model_dump(),
            "arex_version": __version__,
            "baseline_score": self.env.baseline_score,
            "protected": list(self.env.protected),
            "started_at": time.time(),
        }
