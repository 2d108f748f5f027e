"""The model drafter: the teacher writes the ML spec, acting in a sandbox that holds the repository.

It is the rollouts' loop in small, so a model trained on arex trajectories acts the same here: the
same client (`arex.teacher.client`, the bundled local teacher when `teacher.base_url` is unset),
the same action format (`arex.rollout.parse`: one ```bash block per reply, `submit` to finish),
the same budgets (`rollout.steps_per_round` commands per attempt; `rollout.max_tokens`,
`max_cost_usd`, `max_wall_s` for the whole draft), checked in one place (`_Session.over_budget`).

On `submit` the workdir's `arex.yaml` is the draft's spec; text files the model created or changed
are its `add`, files it deleted its `remove`. When the build rejects a draft, the same conversation
goes on in the same sandbox with the build's reason; `close()` (or garbage collection) ends both.
"""

from __future__ import annotations

import asyncio
import shutil
import tarfile
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from arex.drafting.base import Attempt, Draft, DraftError, DraftSettings, Guess
from arex.errors import ArexError, UserInputError
from arex.rollout.config import BUNDLED, RolloutConfig
from arex.rollout.parse import clip, parse_action
from arex.sandbox.base import SandboxConfig
from arex.teacher.config import TeacherConfig

if TYPE_CHECKING:
    from arex.sandbox.base import Sandbox

SPEC_FILE = "arex.yaml"
PROMPTS = frozenset({"system", "task", "revise", "no_spec", "bad_spec", "observation", "format_error"})
"""The prompts a drafter prompts file must define."""
_SKIPPED_PARTS = frozenset({".git", "__pycache__"})
"""Folders whose files never become part of a draft (bytecode, version control)."""
_REMOVE = """
import glob, os, shutil, sys
for pattern in sys.argv[1:]:
    for path in glob.glob(pattern, recursive=True):
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
"""


class ModelDrafter(BaseModel):
    """The teacher model drafts the spec by acting in a sandbox holding a copy of the repository."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: ClassVar[str] = "model"

    teacher: TeacherConfig = Field(default_factory=TeacherConfig)
    """The model that drafts, as for rollouts (the `teacher:` section); without `base_url` the
    bundled local teacher is started, and stopped by `close()`."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Budgets shared with rollouts: `steps_per_round` commands per attempt, `format_error_streak`,
    `command_timeout_s`, `observation_chars`; `max_tokens`, `max_cost_usd`, `max_wall_s` for the
    whole draft (every attempt of one repository)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Where the model acts: the repository is copied to the workdir; no network by default."""
    prompts: str | None = None
    """Drafter prompts file; unset: the bundled one (arex/data/prompts/draft.yaml)."""
    max_file_bytes: int = Field(default=256 << 10, ge=1)
    """Largest text file the model creates or changes that goes into the draft's `add` (and the
    largest arex.yaml read); larger or binary files are left out."""

    _session: _Session | None = PrivateAttr(default=None)

    @classmethod
    def from_config(cls, config: DraftSettings, **overrides: Any) -> ModelDrafter:
        """The drafter of a user's arex config: its teacher, rollout budgets and sandbox."""
        return cls(teacher=config.teacher, rollout=config.rollout, sandbox=config.sandbox, **overrides)

    def draft(self, repo: Path, attempts: list[Attempt]) -> Draft:
        """A draft for `repo`; after a rejected attempt, the revision the model makes from the
        build's reason (in the same conversation and sandbox when this drafter made that attempt)."""
        session = self._session
        if session is None or not session.continues(repo, attempts):
            self.close()
            session = _Session(self, repo, self.load_prompts())
            session.open(attempts[-1].draft if attempts else None)
            self._session = session
            weakref.finalize(self, session.close)  # a caller that never calls close() leaves no sandbox behind
        opening = session.revise_prompt(attempts[-1].reason) if attempts else session.prompt("task")
        try:
            session.last = _run_sync(session.attempt(opening))
            session.made += 1
        except BaseException:
            self.close()  # a draft that failed for good: nothing to revise
            raise
        return session.last

    def close(self) -> None:
        """Stop the sandbox and the local teacher of the current draft (safe to call twice)."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> ModelDrafter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def load_prompts(self) -> dict[str, str]:
        path = Path(self.prompts) if self.prompts else BUNDLED / "prompts" / "draft.yaml"
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserInputError(
                f"drafter prompts: no file {path}; point `prompts` at a prompts file, or unset it for the bundled one"
            ) from None
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise UserInputError(
                f"drafter prompts file {path} cannot be read as YAML ({exc}); "
                "give a UTF-8 YAML mapping of prompt names to texts"
            ) from None
        missing = PROMPTS - set(data) if isinstance(data, dict) else PROMPTS
        not_text = sorted(k for k in PROMPTS - missing if not isinstance(data[k], str))
        if missing or not_text:
            raise UserInputError(
                f"drafter prompts file {path} must give these prompts as texts: {', '.join(sorted(missing) + not_text)}"
            )
        return data


class _Session:
    """One repository's drafting: the sandbox, the local teacher, the conversation and the spend."""

    def __init__(self, drafter: ModelDrafter, repo: Path, prompts: dict[str, str]):
        self.cfg, self.repo, self.prompts = drafter, Path(repo), prompts
        self.box: Sandbox | None = None
        self.local = None  # the bundled local teacher, when this session started one
        self.base_url = drafter.teacher.base_url
        self.messages: list[dict[str, Any]] = []
        self.tokens, self.cost, self.started = 0, 0.0, time.monotonic()
        self.last: Draft | None = None
        self.made = 0
        """Drafts this session has made (the attempts it continues from)."""

    def continues(self, repo: Path, attempts: list[Attempt]) -> bool:
        """True if `attempts` are this session's drafts, built: the conversation goes on."""
        if Path(repo) != self.repo or self.last is None or len(attempts) != self.made:
            return False
        built = attempts[-1].draft  # by its files: the caller may have adjusted the spec (`draft_env` sets its id)
        return (built.add, tuple(built.remove)) == (self.last.add, tuple(self.last.remove))

    # -- setting up and tearing down --------------------------------------------------------
    def open(self, earlier: Draft | None) -> None:
        """Start the teacher (if local) and the sandbox, copy the repository in, and lay out the
        `earlier` draft of another drafter or run over it, if one is given."""
        from arex.sandbox import SandboxError, make_sandbox

        try:
            if self.base_url is None:
                from arex.teacher.local import LocalTeacher

                self.local = LocalTeacher(self.cfg.teacher.local, model_alias=self.cfg.teacher.model).start()
                self.base_url = self.local.base_url
                # its one slot, timeouts at its measured speed (arex.teacher.local)
                self.cfg = self.cfg.model_copy(update={"teacher": self.local.fit(self.cfg.teacher)})
            self.box = make_sandbox(self.cfg.sandbox, f"draft-{self.repo.name}")
            self.box.start()
            with tempfile.TemporaryDirectory(prefix="arex-draft-") as staged:
                shutil.copytree(
                    self.repo,
                    Path(staged) / "repo",
                    symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".arex-complete"),
                )
                self.box.copy_in(Path(staged) / "repo", ".")
            if earlier is not None:
                self._lay_out(earlier)
        except (ArexError, OSError) as exc:
            self.close()
            what = "the sandbox" if isinstance(exc, (SandboxError, OSError)) else "the teacher"
            raise DraftError(f"The model drafter could not start {what}: {exc}") from None
        system = self.prompts["system"].format(
            workdir=self.cfg.sandbox.workdir,
            timeout=f"{self.cfg.rollout.command_timeout_s:g}",
            steps=self.cfg.rollout.steps_per_round,
            metrics=", ".join(_metric_names()),
            max_file_kb=self.cfg.max_file_bytes // 1024,
        )
        self.messages = [{"role": "system", "content": system}]

    def _lay_out(self, draft: Draft) -> None:
        """The workdir as `draft` describes it (its spec as arex.yaml, its files added and removed)."""
        for rel, text in draft.add.items():
            self.box.write_file(rel, text)
        if draft.remove:
            self.box.exec(["python3", "-c", _REMOVE, *draft.remove], timeout=self.cfg.rollout.command_timeout_s)
        self.box.write_file(SPEC_FILE, yaml.safe_dump(draft.spec, sort_keys=False, allow_unicode=True))

    def close(self) -> None:
        box, local, self.box, self.local = self.box, self.local, None, None
        if box is not None:
            box.stop()
        if local is not None:
            local.stop()

    # -- the conversation -------------------------------------------------------------------
    def prompt(self, name: str, **values: Any) -> str:
        return self.prompts[name].format(workdir=self.cfg.sandbox.workdir, **values)

    def revise_prompt(self, reason: str | None) -> str:
        return self.prompt("revise", reason=reason or "(the build gave no reason)")

    async def attempt(self, opening: str) -> Draft:
        """Commands until the model submits a readable arex.yaml; the draft it leaves."""
        from arex.teacher.client import TeacherClient, TeacherError

        self.messages.append({"role": "user", "content": opening})
        client = TeacherClient(self.cfg.teacher, base_url=self.base_url)
        try:
            spec = await self._converse(client)
        except TeacherError as exc:
            raise DraftError(f"The teacher failed while drafting: {exc}") from None
        finally:
            await client.close()
        return self._draft(spec)

    async def _converse(self, client) -> dict:
        """The act loop of a rollout round, ending at a `submit` that finds a usable arex.yaml."""
        rollout, steps, streak = self.cfg.rollout, 0, 0
        while True:
            over = self.over_budget(steps)
            if over:
                raise DraftError(f"The model drafter stopped: {over}.")
            reply = await client.chat(self.messages)
            self.tokens += reply.prompt_tokens + reply.completion_tokens
            self.cost += reply.cost_usd
            steps += 1
            self.messages.append({"role": "assistant", "content": reply.content})
            action = parse_action(reply.content if reply.status == "ok" else "")
            streak = streak + 1 if action.kind == "invalid" else 0
            if streak >= rollout.format_error_streak:
                raise DraftError(
                    f"The model drafter stopped: {streak} replies in a row held no command "
                    "(rollout.format_error_streak)."
                )
            if action.kind == "submit":
                spec, problem = self._read_spec()
                if spec is not None:
                    return spec
                shown = problem
            elif action.kind == "command":
                shown = self._run(action.command)
            else:
                shown = self.prompts["format_error"]
            self.messages.append({"role": "user", "content": shown})

    def over_budget(self, steps: int) -> str | None:
        """Every limit of a draft, in one place: the rollouts' budgets."""
        c = self.cfg.rollout
        if steps >= c.steps_per_round:
            return (
                f"the step budget of {c.steps_per_round} commands per attempt (rollout.steps_per_round) "
                "ran out before a usable arex.yaml was submitted"
            )
        spent = c.spent(self.tokens, self.cost, time.monotonic() - self.started)
        return f"the {spent}" if spent else None

    def _run(self, command: str) -> str:
        result = self.box.exec(command, timeout=self.cfg.rollout.command_timeout_s)
        output = clip(result.stdout + result.stderr, self.cfg.rollout.observation_chars)
        return self.prompts["observation"].format(
            exit_code=result.exit_code, status=result.status, seconds=f"{result.duration_s:.1f}", output=output
        )

    def _read_spec(self) -> tuple[dict | None, str]:
        """The submitted spec, or what to tell the model about it (one sentence)."""
        try:
            data = yaml.safe_load(self.box.read_file(SPEC_FILE, max_bytes=self.cfg.max_file_bytes).decode("utf-8"))
        except (FileNotFoundError, IsADirectoryError):
            return None, self.prompt("no_spec")
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark else ""
            return None, self.prompt("bad_spec", error=f"{where}{getattr(exc, 'problem', None) or exc}")
        except (ValueError, PermissionError) as exc:  # over the cap, not UTF-8, unreadable
            return None, self.prompt("bad_spec", error=str(exc)[:300])
        if not isinstance(data, dict):
            return None, self.prompt("bad_spec", error=f"it holds a {type(data).__name__}, not a mapping")
        return data, ""

    # -- the draft --------------------------------------------------------------------------
    def _draft(self, spec: dict) -> Draft:
        add, remove = self._changes(spec)
        guesses = tuple(
            Guess(field=key, value=value, confidence="medium", why="written by the model")
            for key, value in _fields(spec)
        )
        return Draft(spec=spec, add=add, remove=tuple(remove), guesses=guesses)

    def _changes(self, spec: dict) -> tuple[dict[str, str], list[str]]:
        """Text files created or changed relative to the repository, and files deleted from it.
        The spec file and the files arex writes itself (train, test, submission) are not task files."""
        generated = {SPEC_FILE, *_generated(spec)}
        original = {
            p.relative_to(self.repo).as_posix(): p
            for p in self.repo.rglob("*")
            if (p.is_file() or p.is_symlink()) and not _skipped(p.relative_to(self.repo).as_posix())
        }
        original.pop(".arex-complete", None)
        with tempfile.TemporaryDirectory(prefix="arex-draft-") as tmp:
            archive = Path(tmp) / "workdir.tar"
            try:
                with archive.open("wb") as sink:
                    self.box.archive(".", sink, self.cfg.sandbox.disk + (1 << 20))
            except (ValueError, FileNotFoundError) as exc:  # too large, or the model removed the workdir
                raise DraftError(f"The model drafter could not read the workdir back: {exc}") from None
            names, contents = _members(archive, self.cfg.max_file_bytes)
        add = {}
        for rel, data in sorted(contents.items()):
            if (
                rel in generated
                or _skipped(rel)
                or (
                    rel in original
                    and original[rel].is_file()
                    and not original[rel].is_symlink()
                    and original[rel].read_bytes() == data
                )
            ):
                continue
            text = _text(data)
            if text is not None:
                add[rel] = text
        remove = sorted(rel for rel in original if rel not in names and rel != SPEC_FILE)
        return add, remove


# -- helpers -----------------------------------------------------------------------------------
def _run_sync(coro):
    """Run `coro` to its end from synchronous code, even when called inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _metric_names() -> list[str]:
    from arex.grading.ml import METRICS

    return list(METRICS)


def _generated(spec: dict) -> list[str]:
    """Paths arex writes into the workspace for this spec (the model may have run the script)."""
    data = spec.get("data") if isinstance(spec.get("data"), dict) else {}
    submission = spec.get("submission") if isinstance(spec.get("submission"), dict) else {}
    paths = [
        data.get("train_file", "data/train.csv"),
        data.get("test_file", "data/test.csv"),
        submission.get("file", "submission.csv"),
    ]
    return [str(p).strip("/").removeprefix("./") for p in paths if isinstance(p, str)]


def _skipped(rel: str) -> bool:
    return bool(_SKIPPED_PARTS.intersection(rel.split("/"))) or rel.endswith(".pyc")


def _members(archive: Path, cap: int) -> tuple[set[str], dict[str, bytes]]:
    """Every member name of the workdir's archive, and the bytes of its regular files up to `cap`
    (read on the host, never unpacked; links are names only)."""
    names, contents = set(), {}
    with tarfile.open(archive, mode="r:") as tar:
        while (info := tar.next()) is not None:
            tar.members.clear()  # a hostile archive of millions of members must not fill memory
            name = "/".join(part for part in info.name.split("/") if part not in ("", "."))
            if not name or ".." in name.split("/"):
                continue
            names.add(name)
            if info.isreg() and info.size <= cap:
                handle = tar.extractfile(info)
                contents[name] = handle.read() if handle is not None else b""
    return names, contents


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _fields(spec: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Every leaf of the spec as (dotted key, value as text)."""
    out = []
    for key, value in spec.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += _fields(value, f"{dotted}.")
        else:
            text = (
                value
                if isinstance(value, str)
                else yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
            )
            out.append((dotted, text))
    return out
