"""One rollout: one env × one sample × up to R rounds of act → submit → feedback → reflect.

`run()` loops `play_round()`; a round is `_act()` (one teacher call per step until `submit` or a
limit), grading, then `_reflect()`. Budgets are checked in one place (`Ledger.over_budget`); every line
of the record (arex.record.trajectory) is appended as it happens, and the record is closed with its
ending in `finally`. A re-run resumes from the last complete round. The loop never asks which
action format is in use (arex.rollout.formats) and holds no sandbox logistics (the agent sandbox's
whole life is arex.rollout.sandboxes).
"""

from __future__ import annotations

import asyncio
import time

from arex import __version__
from arex.envs.runtime import Env
from arex.grading.pool import GradingPools
from arex.record.snapshots import SnapshotStore
from arex.record.trajectory import (
    TOOLS_SCHEMA_VERSION,
    Action,
    Call,
    End,
    Exec,
    Header,
    RecordWriter,
    Reflection,
    RoundEnd,
    RoundStart,
    Spent,
    Step,
    Trajectory,
    load,
)
from arex.record.url_store import publisher
from arex.rollout.config import RolloutConfig, Slot
from arex.rollout.endings import STORE_ERRNOS, ending_of, redone
from arex.rollout.formats import FORMATS
from arex.rollout.keep import Keeper
from arex.rollout.ledger import Ledger
from arex.rollout.memory import Memory, system_prompt
from arex.rollout.parse import clip, parse_reflection
from arex.rollout.sandboxes import AgentSandbox, agent_config, archive_to_restore, skills_of
from arex.sandbox import Sandbox, SandboxConfig, SandboxError
from arex.specs import TeacherIdentity
from arex.teacher.client import TeacherClient, TeacherError


class Rollout:
    def __init__(
        self,
        env: Env,
        teacher: TeacherClient,
        identity: TeacherIdentity,
        config: RolloutConfig,
        sandbox: SandboxConfig,
        slot: Slot,
        pools: GradingPools | None = None,
        box: "asyncio.Future[Sandbox | None] | None" = None,
    ):
        """`pools`: the batch's shared grading containers; `box`: this rollout's agent sandbox being
        started ahead by the batch (it may still be starting), else (or if that start failed) the
        rollout starts its own (arex.rollout.sandboxes)."""
        self.env, self.teacher, self.identity, self.config = env, teacher, identity, config
        ss = skills_of(env, config)
        self.sandbox_config = agent_config(env, config, sandbox)
        self.path, self.sample, self.key, self.config_hash = slot.path, slot.sample, slot.key, slot.config_hash
        # Workspace archives by sha256; round_end lines name theirs. Never unpacked on the host.
        self.store = SnapshotStore(self.path.with_suffix("") / "snapshots")
        self.keeper = Keeper(self.store)
        self.prompts = config.load_prompts()
        timeout = f"{config.command_timeout_s:g}"
        workdir = self.sandbox_config.workdir
        self.format = FORMATS[config.action_format](self.prompts, config.skills_target, ss.paths(), workdir, timeout)
        system = system_prompt(self.prompts, self.format.system_prompt, config, workdir, env, ss.catalogue())
        self.memory = Memory(self.prompts, config, system)
        self.grading = env.open_grading(sandbox, pools)
        self.sandbox = AgentSandbox(env, self.sandbox_config, slot.sample, box)
        self.writer = None  # set by run()
        self.ledger, self.rounds_done = Ledger(config), 0
        self.on_round = None  # callback(rollout, RoundEnd) for progress displays
        self.publish = publisher(self.path)  # a store at a URL: each complete round is uploaded (arex.record.url_store)

    # -- the loop ------------------------------------------------------------------------------
    async def run(self) -> End:
        """Play the rollout to its end, or resume it. RecordError (nothing written) if its record
        cannot be read."""
        try:
            previous = load(self.path)
            if not redone(previous.end):
                await self.sandbox.end()
                return previous.end
            previous = load(self.path, truncate=True, keep_end=False)  # drop a cut round; redo an infra failure
            self.writer = RecordWriter(self.path, on_commit=self.publish)
        except BaseException:  # an unreadable record, a store that cannot be written: no sandbox is wanted
            self.sandbox.discard()
            raise
        status, reason = "done", f"all {self.config.rounds} rounds played"
        try:
            if previous.header is None:
                self.writer.write(self._header())
            self._restore(previous)
            self.keeper.prune()  # what a stop left: a cut round's archive, or one the last round replaced
            # The sandbox starts while the first teacher call is out: the first command waits for it.
            restore = lambda: archive_to_restore(self.store, self.keeper.last(), self.rounds_done)  # noqa: E731
            self.sandbox.begin(restore, then=self.grading.warm)
            for number in range(self.rounds_done + 1, self.config.rounds + 1):
                over = self.ledger.over_budget()
                if over:
                    status, reason = "budget", over
                    break
                await self.play_round(number)
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit) as exc:
            status, reason = ending_of(exc)
            raise
        except OSError as exc:
            status, reason = ("interrupted", str(exc)) if exc.errno in STORE_ERRNOS else ending_of(exc)
            if status == "interrupted":
                raise
        except Exception as exc:  # noqa: BLE001 - one broken rollout must not stop the batch; it is redone
            status, reason = ending_of(exc)
            if isinstance(exc, TeacherError) and exc.attempts:
                self.writer.write(self.ledger.failed_call(exc, self.rounds_done + 1, self.teacher))
        finally:
            try:
                end = self._close(status, reason)
            finally:
                await self.sandbox.end()
        return end

    def _close(self, status: str, reason: str) -> End:
        end = End(
            status=status,
            reason=reason,
            rounds=self.rounds_done,
            best=self.memory.best,
            tokens=self.ledger.tokens,
            cost_usd=round(self.ledger.cost, 6),
            seconds=round(self.ledger.seconds, 2),
        )
        if status != "interrupted":  # an interrupted rollout stays open, to be resumed
            self.writer.write(end)
        self.writer.close()
        self.sandbox.cancel_then()
        self.grading.close()
        if self.publish is not None:
            self.publish.wait()  # the last round and the end are at the URL (UrlStoreError naming it if not)
        return end

    async def play_round(self, number: int) -> None:
        context = self.memory.context(number)
        self.writer.write(RoundStart(round=number, context=context))
        messages = list(context)
        ending = await self._act(number, messages)
        box = await self.sandbox.get()
        grade, snapshot, submission = await asyncio.to_thread(self.env.grade_round, box, self.grading, self.store)
        if grade.infra_error:
            raise SandboxError(f"grading failed: {grade.infra_error}")
        feedback = self.memory.feedback(number, grade)  # only what rollout.feedback lets the agent see
        reflect_prompt = self.memory.reflect_prompt(number, feedback)
        reflection = await self._reflect(messages, reflect_prompt)
        improved, m = self.memory.improves(grade), self.memory
        m.note(number, grade, feedback, reflection.state, messages)
        self.rounds_done = number
        end = RoundEnd(
            round=number,
            ending=ending,
            submission=submission,
            snapshot=snapshot,
            grade=grade,
            feedback=feedback,
            reflect_prompt=reflect_prompt,
            reflection=reflection,
            state=m.state,
            best=m.best,
            best_public=m.best_public,
        )
        self.writer.write(end)
        self.keeper.note(end, improved)
        self.keeper.prune()
        if self.on_round:
            self.on_round(self, end)

    async def _act(self, number: int, messages: list[dict]) -> str:
        """Teacher calls and their commands until `submit` or a limit; returns how the acting ended."""
        streak = 0
        for index in range(self.config.steps_per_round):
            if self.ledger.over_budget():
                return "budget"
            reply = await self.format.act(self.teacher, messages)
            self.ledger.count(reply)
            try:
                step = await self._step(number, index, self.format.record(reply))
            except BaseException as exc:  # no step line: the call is on the record as spent, paid all the same
                self._write_spent(self.ledger.stepless(reply, number, exc))
                raise
            self.writer.write(step)
            messages += step.turns()  # what the record rebuilds (Round.messages), by construction
            if step.action.kind == "submit":
                return "submitted"
            streak = streak + 1 if step.action.kind == "invalid" else 0
            if streak >= self.config.format_error_streak:
                return "format_errors"
        return "step_limit"

    def _write_spent(self, spent: Spent) -> None:
        """Write a spent line on the way out of a failure, which stays the error that goes up (a store
        that cannot take this line either is that failure's to report)."""
        try:
            self.writer.write(spent)
        except OSError:
            pass

    async def _step(self, number: int, index: int, call: Call) -> Step:
        """Run the reply's action; the step line, with what the agent is shown next."""
        action = self.format.action(call)
        shown, exec_ = None, None
        if action.kind == "command":
            box = await self.sandbox.get()
            result = await asyncio.to_thread(box.exec, action.command, self.config.command_timeout_s)
            exec_ = Exec(status=result.status, exit_code=result.exit_code, seconds=result.duration_s)
            output = clip(result.stdout + result.stderr, self.config.observation_chars)
            shown = self.prompts["observation"].format(
                exit_code=result.exit_code, status=result.status, seconds=f"{result.duration_s:.1f}", output=output
            )
        elif action.kind == "invalid":
            shown = self.format.invalid(action)
        fields = {"round": number, "step": index, "call": call, "action": Action(**action.__dict__), "exec": exec_}
        return self.format.step(fields, action, shown)

    async def _reflect(self, messages: list[dict], reflect_prompt: str) -> Reflection:
        messages.append({"role": "user", "content": reflect_prompt})
        budget = self.config.reflection_tokens  # the reflection's length budget (its words are in the prompt)
        call = await self.format.reflect(self.teacher, messages, **({"max_tokens": budget} if budget else {}))
        self.ledger.count(call)
        parsed = parse_reflection(call.content if call.status == "ok" else "")
        messages.append({"role": "assistant", "content": call.content})
        return Reflection(call=self.format.record(call), **parsed.__dict__)

    # -- resuming ----------------------------------------------------------------------------
    def _restore(self, previous: Trajectory) -> None:
        """Carry on from a record: its complete rounds, and every call it paid for."""
        for round_ in previous.rounds:
            self.rounds_done = round_.end.round
            self.keeper.note(round_.end, improved=bool(round_.end.best and round_.end.best.round == round_.end.round))
            self.memory.restore(round_)
        self.ledger.count_record(previous)

    def _header(self) -> Header:
        marks = self.teacher.config.cache_breakpoints  # requests sent with prompt-cache marks: a version-3 field
        return Header(
            schema_version=TOOLS_SCHEMA_VERSION if marks else self.format.schema_version,
            key=self.key, env_id=self.env.id, env_kind=self.env.kind,
            domain=self.env.spec.domain,
            spec_hash=self.env.spec_hash, sample=self.sample, teacher=self.identity, sampling=self.teacher.sampling(),
            config_hash=self.config_hash, config=self.config.model_dump(), arex_version=__version__,
            baseline_score=self.env.baseline_score, protected=list(self.env.protected), started_at=time.time(),
            action_format=self.config.action_format, tools=self.format.schema, cache_breakpoints=marks,
        )  # fmt: skip
