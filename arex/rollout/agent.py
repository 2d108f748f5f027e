"""One rollout: one env × one sample × up to R rounds of act → submit → feedback → reflect.

`run()` loops `play_round()`; a round is `_act()` (one teacher call per step until `submit` or a
limit), grading, then `_reflect()`. Budgets are checked in one place (`_over_budget`); every line
of the record (arex.record.trajectory) is appended as it happens, and the record is closed with its
ending in `finally`. A re-run resumes from the last complete round.
"""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from arex import __version__
from arex.envs.runtime import Env
from arex.grading.pool import GradingPools, stop_started
from arex.record.snapshots import SnapshotStore
from arex.record.trajectory import SCHEMA_VERSION, TOOLS_SCHEMA_VERSION, Action, Call, End, Exec, Header, RecordWriter, Reflection, RoundEnd, RoundStart, Spent, Step, Trajectory, load
from arex.record.url_store import publisher
from arex.rollout.config import RolloutConfig
from arex.rollout.keep import Keeper
from arex.rollout.memory import Memory
from arex.rollout.parse import Action as ParsedAction
from arex.rollout.parse import clip, parse_action, parse_reflection
from arex.rollout.skills import skill_set
from arex.rollout.tools import parse_tool_calls, tool_schema
from arex.sandbox import Sandbox, SandboxConfig, SandboxError, make_sandbox
from arex.specs import TeacherIdentity
from arex.teacher.client import Reply, TeacherClient, TeacherError

INFRA = "infra_failed"
# The store cannot take more (full, read-only): every rollout would fail alike, so this one stops
# open to resume and the error goes up to the batch, which names the path.
_STORE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
# Agent sandboxes being started (and their workspaces put in place) by this process. Each is on its
# rollout's critical path, so grading warm-ups (needed a round later) wait for them rather than
# compete for the CPU.
_starting = [0]
_counting = threading.Lock()


def _call(call: Reply, tools: bool) -> Call:
    """The call as recorded. Tool calls only in the `tools` format: in `text` they are no action."""
    return Call.model_validate(call.model_dump(exclude={"messages"} if tools else {"messages", "tool_calls"}))


def _ending_of(exc: BaseException) -> tuple[str, str]:
    """The end status and reason of a rollout stopped by `exc`."""
    if isinstance(exc, TeacherError):
        status = INFRA if exc.kind == "unreachable" else ("context_overflow" if exc.kind == "context_length" else "teacher_error")
        return status, str(exc)
    if isinstance(exc, SandboxError):
        return INFRA, f"sandbox: {exc}"
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):  # SystemExit: SIGTERM
        return "interrupted", "stopped by the user; re-run to resume"
    return INFRA, f"unexpected {type(exc).__name__}: {exc}"


def _skills(env: Env, config: RolloutConfig):
    """General skills (rollout.general_skills) and the env's own (rollout.task_skills), each mounted read-only."""
    return skill_set(config.skills_path() if config.general_skills else None, env.dir if config.task_skills else None, config.skills_target)


def agent_config(env: Env, config: RolloutConfig, sandbox: SandboxConfig) -> SandboxConfig:
    """The agent sandbox's config of a rollout of `env`."""
    ss = _skills(env, config)
    return env.sandbox_config(sandbox, ss.general_dir, ss.general_target, ss.task_dir, ss.task_target)


def sandbox_name(env: Env, sample: int) -> str:
    return f"rollout-{env.id}-{sample}"


def start_ahead(env: Env, config: RolloutConfig, sandbox: SandboxConfig, path: Path, sample: int) -> Sandbox | None:
    """The agent sandbox of a rollout still waiting to run, started now (blocking), or None if its
    record is finished (it will need none)."""
    try:
        previous = load(path)
        if previous.end is not None and previous.end.status != INFRA:
            return None
    except Exception:  # noqa: BLE001 - the rollout itself reports an unreadable record
        return None
    box = make_sandbox(agent_config(env, config, sandbox), sandbox_name(env, sample))
    with starting():
        box.start()
    return box


@contextmanager
def starting() -> Iterator[None]:
    """Count an agent sandbox start (in any thread): grading containers wait for none to be left."""
    with _counting:
        _starting[0] += 1
    try:
        yield
    finally:
        with _counting:
            _starting[0] -= 1


async def _adopt(ahead: "asyncio.Future[Sandbox | None] | None") -> Sandbox | None:
    """The sandbox started ahead for this rollout, once up; None if there was none or its start
    failed (the rollout then starts its own, which reports the failure)."""
    if ahead is None:
        return None
    try:
        return await asyncio.shield(ahead)
    except asyncio.CancelledError:
        _discard(ahead)
        raise
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def _discard(ahead: "asyncio.Future[Sandbox | None] | None") -> None:
    """Remove a sandbox started ahead that its rollout will not use, once its start ends."""
    if ahead is not None:
        ahead.add_done_callback(stop_started)


class Rollout:
    def __init__(self, env: Env, teacher: TeacherClient, identity: TeacherIdentity, config: RolloutConfig, sandbox: SandboxConfig, path: Path, sample: int, key: str, config_hash: str,
                 pools: GradingPools | None = None, box: "asyncio.Future[Sandbox | None] | None" = None):  # fmt: skip
        """`pools`: the batch's shared grading containers; `box`: this rollout's agent sandbox being
        started ahead by the batch (start_ahead; it may still be starting), else (or if that start
        failed) the rollout starts its own."""
        self.env, self.teacher, self.identity, self.config = env, teacher, identity, config
        self.skill_set = ss = _skills(env, config)
        self.sandbox_config = agent_config(env, config, sandbox)
        self.path, self.sample, self.key, self.config_hash = path, sample, key, config_hash
        # Workspace archives by sha256; round_end lines name theirs. Never unpacked on the host.
        self.store = SnapshotStore(path.with_suffix("") / "snapshots")
        self.keeper = Keeper(self.store)
        self.prompts = config.load_prompts()
        self.tools = config.action_format == "tools"
        self.skills = ss.paths()  # read_skill names → SKILL.md in the sandbox
        self.schema = tool_schema(self.prompts, self.sandbox_config.workdir, f"{config.command_timeout_s:g}", config.skills_target, list(self.skills)) if self.tools else None
        self.memory = Memory(self.prompts, config, self._system(ss.catalogue()))
        self.grading = env.open_grading(sandbox, pools)
        self.box, self.writer, self._warming, self._ready = None, None, None, None  # set by run()
        self._ahead = box
        self.tokens, self.cost, self.rounds_done = 0, 0.0, 0
        self.started = time.monotonic()
        self.on_round = None  # callback(rollout, RoundEnd) for progress displays
        self.publish = publisher(path)  # a store at a URL: each complete round is uploaded (arex.record.url_store)

    # -- the loop ------------------------------------------------------------------------------
    async def run(self) -> End:
        """Play the rollout to its end, or resume it. RecordError (nothing written) if its record
        cannot be read."""
        try:
            previous = load(self.path)
            if previous.end is not None and previous.end.status != INFRA:
                _discard(self._ahead)
                return previous.end
            previous = load(self.path, truncate=True, keep_end=False)  # drop a cut round; redo an infra failure
            self.writer = RecordWriter(self.path, on_commit=self.publish)
        except BaseException:  # an unreadable record, a store that cannot be written: no sandbox is wanted
            _discard(self._ahead)
            raise
        status, reason = "done", f"all {self.config.rounds} rounds played"
        try:
            if previous.header is None:
                self.writer.write(self._header())
            self._restore(previous)
            self.keeper.prune()  # what a stop left: a cut round's archive, or one the last round replaced
            # The sandbox starts while the first teacher call is out: the first command waits for it (_box).
            self._ready = asyncio.ensure_future(self._start())
            for number in range(self.rounds_done + 1, self.config.rounds + 1):
                over = self._over_budget()
                if over:
                    status, reason = "budget", over
                    break
                await self.play_round(number)
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit) as exc:
            status, reason = _ending_of(exc)
            raise
        except OSError as exc:
            status, reason = ("interrupted", str(exc)) if exc.errno in _STORE_ERRNOS else _ending_of(exc)
            if status == "interrupted":
                raise
        except Exception as exc:  # noqa: BLE001 - one broken rollout must not stop the batch; it is redone
            status, reason = _ending_of(exc)
            if isinstance(exc, TeacherError) and exc.attempts:
                self._spend(exc)
        finally:
            if self._ready is not None:
                if not self._ready.done():  # its thread may still create the container: stop it after
                    await asyncio.wait([self._ready])
                if not self._ready.cancelled():
                    self._ready.exception()  # seen: a start that failed before any command is this ending's cause or moot
            if self._ready is None:  # ended before its sandbox was wanted
                _discard(self._ahead)
            try:
                end = self._close(status, reason)
            finally:
                await self._remove_box()
        return end

    async def _remove_box(self) -> None:
        """Remove the sandbox in a worker thread: a removal takes ~0.1 s of the engine, and rollouts
        ending together must not stall the event loop the others' teacher calls run on. A task
        cancelled again meanwhile removes it itself before going on (stop() is idempotent)."""
        box, self.box = self.box, None
        if box is None:
            return
        removal = asyncio.ensure_future(asyncio.to_thread(box.stop))
        try:
            await asyncio.shield(removal)
        except asyncio.CancelledError:
            box.stop()
            raise

    async def _box(self) -> Sandbox:
        """The started sandbox (SandboxError if it could not start)."""
        await self._ready
        return self.box

    async def _start(self) -> None:
        with starting():  # until its workspace is in place
            self.box = await _adopt(self._ahead)
            if self.box is None:  # none started ahead, or that start failed: this one reports why
                self.box = make_sandbox(self.sandbox_config, sandbox_name(self.env, self.sample))
                await asyncio.to_thread(self.box.start)
            last = self.keeper.last()
            if self.rounds_done and last:  # resuming: as the last kept round left it
                await asyncio.to_thread(self.box.restore, self.store.path(last), self.sandbox_config.workdir)
            else:
                await asyncio.to_thread(self.env.prepare, self.box)
        self._warming = asyncio.ensure_future(self._warm_grading())

    def _close(self, status: str, reason: str) -> End:
        end = End(status=status, reason=reason, rounds=self.rounds_done, best=self.memory.best, tokens=self.tokens, cost_usd=round(self.cost, 6), seconds=round(time.monotonic() - self.started, 2))
        if status != "interrupted":  # an interrupted rollout stays open, to be resumed
            self.writer.write(end)
        self.writer.close()
        if self._warming is not None:
            self._warming.cancel()
        self.grading.close()
        if self.publish is not None:
            self.publish.wait()  # the last round and the end are at the URL (UrlStoreError naming it if not)
        return end

    async def _warm_grading(self) -> None:
        for _ in range(100):  # at most 2 s: agent sandboxes first, they are on every rollout's path
            if not _starting[0]:
                break
            await asyncio.sleep(0.02)
        self.grading.warm()

    async def play_round(self, number: int) -> None:
        context = self.memory.context(number)
        self.writer.write(RoundStart(round=number, context=context))
        messages = list(context)
        ending = await self._act(number, messages)
        grade, snapshot, submission = await asyncio.to_thread(self.env.grade_round, await self._box(), self.grading, self.store)
        if grade.infra_error:
            raise SandboxError(f"grading failed: {grade.infra_error}")
        feedback = self.memory.feedback(number, grade)  # only what rollout.feedback lets the agent see
        reflect_prompt = self.memory.reflect_prompt(number, feedback)
        reflection = await self._reflect(messages, reflect_prompt)
        improved, m = self.memory.improves(grade), self.memory
        m.note(number, grade, feedback, reflection.state, messages)
        self.rounds_done = number
        end = RoundEnd(
            round=number, ending=ending, submission=submission, snapshot=snapshot, grade=grade, feedback=feedback, reflect_prompt=reflect_prompt,
            reflection=reflection, state=m.state, best=m.best, best_public=m.best_public,
        )  # fmt: skip
        self.writer.write(end)
        self.keeper.note(end, improved)
        self.keeper.prune()
        if self.on_round:
            self.on_round(self, end)

    async def _act(self, number: int, messages: list[dict]) -> str:
        """Teacher calls and their commands until `submit` or a limit; returns how the acting ended."""
        streak = 0
        for index in range(self.config.steps_per_round):
            if self._over_budget():
                return "budget"
            reply = await self.teacher.chat(messages, tools=self.schema) if self.tools else await self.teacher.chat(messages)
            self._count(reply)
            step = await self._step(number, index, _call(reply, self.tools))
            self.writer.write(step)
            messages += step.turns()  # what the record rebuilds (Round.messages), by construction
            if step.action.kind == "submit":
                return "submitted"
            streak = streak + 1 if step.action.kind == "invalid" else 0
            if streak >= self.config.format_error_streak:
                return "format_errors"
        return "step_limit"

    def _action(self, call: Call) -> ParsedAction:
        """What the reply asks for (a reply the teacher did not finish is read as empty)."""
        if self.tools:
            if call.status != "ok":
                return ParsedAction("invalid", error=f"the reply was {call.status}")
            return parse_tool_calls(call.tool_calls, self.config.skills_target, self.skills)
        return parse_action(call.content if call.status == "ok" else "")

    async def _step(self, number: int, index: int, call: Call) -> Step:
        """Run the reply's action; the step line, with what the agent is shown next."""
        action = self._action(call)
        shown, exec_ = None, None
        if action.kind == "command":
            box = await self._box()
            result = await asyncio.to_thread(box.exec, action.command, self.config.command_timeout_s)
            exec_ = Exec(status=result.status, exit_code=result.exit_code, seconds=result.duration_s)
            output = clip(result.stdout + result.stderr, self.config.observation_chars)
            shown = self.prompts["observation"].format(exit_code=result.exit_code, status=result.status, seconds=f"{result.duration_s:.1f}", output=output)
        elif action.kind == "invalid":
            shown = self.prompts["format_error_tools"].format(error=action.error) if self.tools else self.prompts["format_error"]
        step = {"round": number, "step": index, "call": call, "action": Action(**action.__dict__), "exec": exec_}
        calls = (call.tool_calls or []) if self.tools else []
        if not calls:  # text format, or a reply with no tool call to answer: a user message
            return Step(**step, observation=shown)
        # Every call is answered (OpenAI-format conversations require it); only the first ran.
        first = self.prompts["tool_submitted"] if action.kind == "submit" else shown
        return Step(**step, tool_results=[first] + [self.prompts["tool_not_run"]] * (len(calls) - 1))

    async def _reflect(self, messages: list[dict], reflect_prompt: str) -> Reflection:
        messages.append({"role": "user", "content": reflect_prompt})
        # The tools stay offered (the conversation holds tool calls) but may not be called.
        call = await self.teacher.chat(messages, tools=self.schema, tool_choice="none") if self.tools else await self.teacher.chat(messages)
        self._count(call)
        parsed = parse_reflection(call.content if call.status == "ok" else "")
        messages.append({"role": "assistant", "content": call.content})
        return Reflection(call=_call(call, self.tools), **parsed.__dict__)

    def _system(self, skills: str) -> str:
        return self.prompts["system_tools" if self.tools else "system"].format(
            workdir=self.sandbox_config.workdir, timeout=f"{self.config.command_timeout_s:g}", steps=self.config.steps_per_round,
            skills_dir=self.config.skills_target, skills=skills, title=self.env.title, statement=self.env.statement.strip(),
            docs=f"\n{self.prompts['docs'].strip()}\n" if self.config.docs and self.prompts.get("docs") else "",  # rollout.docs: its own paragraph
        )  # fmt: skip

    # -- budgets, accounting, resuming --------------------------------------------------------
    def _over_budget(self) -> str | None:
        c = self.config
        if c.max_tokens is not None and self.tokens >= c.max_tokens:
            return f"token budget {c.max_tokens} reached ({self.tokens})"
        if c.max_cost_usd is not None and self.cost >= c.max_cost_usd:
            return f"cost budget ${c.max_cost_usd:g} reached (${self.cost:.4f})"
        if c.max_wall_s is not None and time.monotonic() - self.started >= c.max_wall_s:
            return f"wall-time budget {c.max_wall_s:g}s reached"
        return None

    def _count(self, call: Reply | Call | Spent) -> None:
        self.tokens, self.cost = self.tokens + call.prompt_tokens + call.completion_tokens, self.cost + call.cost_usd

    def _spend(self, exc: TeacherError) -> None:
        """Record the paid attempts of a call that failed for good (they belong to no round)."""
        a = exc.attempts
        prompt, cached, completion = sum(x.prompt_tokens for x in a), sum(x.cached_tokens for x in a), sum(x.completion_tokens for x in a)
        spent = Spent(
            round=self.rounds_done + 1, calls=1, prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
            cost_usd=self.teacher.cost(prompt, cached, completion), reason=f"a call failed after {len(a)} attempt(s): {exc}"[:500],
        )  # fmt: skip
        self.writer.write(spent)
        self._count(spent)

    def _restore(self, previous: Trajectory) -> None:
        """Carry on from a record: its complete rounds, and every call it paid for."""
        for round_ in previous.rounds:
            self.rounds_done = round_.end.round
            self.keeper.note(round_.end, improved=bool(round_.end.best and round_.end.best.round == round_.end.round))
            self.memory.restore(round_)
            for call in [step.call for step in round_.steps] + [round_.end.reflection.call]:
                self._count(call)
        for spent in previous.spent:
            self._count(spent)

    def _header(self) -> Header:
        return Header(
            schema_version=TOOLS_SCHEMA_VERSION if self.tools else SCHEMA_VERSION, key=self.key, env_id=self.env.id, env_kind=self.env.kind, domain=self.env.spec.domain,
            spec_hash=self.env.spec_hash, sample=self.sample, teacher=self.identity, sampling=self.teacher.sampling(),
            config_hash=self.config_hash, config=self.config.model_dump(), arex_version=__version__,
            baseline_score=self.env.baseline_score, protected=list(self.env.protected), started_at=time.time(),
            action_format=self.config.action_format, tools=self.schema,
        )  # fmt: skip
