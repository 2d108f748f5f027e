"""Where a batch's rollouts run: one protocol, implementations chosen by short name (`--executor`).

`run_batch` (arex.rollout.batch) holds the store's lock, removes leftovers and checks the inputs;
then the executor's `run_locked` plays every (env, sample) rollout and writes summary.json.
`local` runs them in this process's event loop (the path `run_batch` takes without an executor);
`ray` runs each as a task on a Ray cluster (arex.rollout.ray_executor), with the same keys, the
same records on the same store, and the same summary. `arex select` asks the same executor for
its `regrader`: where each re-grading of a round runs (a fresh sandbox every time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, ClassVar, Protocol

from arex.envs.runtime import Env
from arex.errors import UserInputError
from arex.record.trajectory import RoundEnd
from arex.rollout import batch
from arex.sandbox import SandboxConfig
from arex.specs import GradeResult

Regrade = Callable[[Env, Path, RoundEnd, SandboxConfig], GradeResult]
"""(env, a round's workspace archive, its round_end, the base sandbox) → the round graded again."""


class Executor(Protocol):
    """Runs a batch's rollouts once the store is locked; returns (and writes) the run summary."""

    name: ClassVar[str]
    runs_variants: ClassVar[bool]
    """Whether `arex rollout --variants` can use it (arex.variants shares one event loop among batches)."""

    async def run_locked(
        self,
        envs: list,
        teacher_config,
        rollout_config,
        sandbox_config,
        out: Path,
        samples: int,
        concurrency: int,
        base_url,
        console,
        shared,
    ) -> dict: ...

    def regrader(self, store: Path) -> Regrade:
        """How `arex select` re-grades a round of a trajectory in `store` (a fresh sandbox each time)."""


class LocalExecutor:
    """Every rollout an asyncio task in this process (today's path, unchanged)."""

    name: ClassVar[str] = "local"
    runs_variants: ClassVar[bool] = True

    def __init__(self, address: str | None = None):
        if address is not None:
            raise UserInputError(
                "--address is for --executor ray; the local executor runs in this process "
                "(drop --address or add --executor ray)"
            )

    async def run_locked(self, *args) -> dict:
        return await batch._run_locked(*args)

    def regrader(self, store: Path) -> Regrade:
        return lambda env, archive, end, sandbox: env.regrade(archive, end, sandbox)


def _ray(address: str | None = None) -> Executor:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UserInputError("--executor ray needs Ray, which is not installed: pip install 'arex[ray]'") from None
    from arex.rollout.ray_executor import RayExecutor

    return RayExecutor(address or "auto")


EXECUTORS: dict[str, Callable[[str | None], Executor]] = {"local": LocalExecutor, "ray": _ray}


def make_executor(name: str, address: str | None = None) -> Executor:
    """The executor called `name`; UserInputError naming the known ones for any other."""
    if name not in EXECUTORS:
        raise UserInputError(f"--executor {name!r} is not known; choose one of: {', '.join(EXECUTORS)}")
    return EXECUTORS[name](address)
