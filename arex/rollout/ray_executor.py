"""`arex rollout --executor ray`: each (env, sample) rollout a Ray task, on whichever node it lands.

The driver (the `arex rollout` process) holds the store's lock, computes the keys exactly as the
local executor does (config_hash, rollout_key), keeps at most --concurrency rollouts in flight,
draws the same live table and writes the same summary.json. A task runs one `Rollout` with its
node's own Docker engine. Only the store needs shared storage (the same absolute path on every
node, checked by a marker file the driver writes; or a URL: each task works on its node's mirror
and uploads per round, arex.record.url_store); env folders travel by content (packed once, put
in the object store, unpacked into a node-local cache keyed by the pack's hash), and an env image a
node lacks (ML envs' `spec.image`) is loaded there from a copy the driver saves once under
`<store>/.arex-images/`, by image id.

A node lost mid-run costs its rollouts' current rounds: their records hold every finished round,
the task becomes `infra_failed` ("node lost ...; re-run to resume") without a Ray retry (one could
race a resumed run) and the batch exits non-zero (arex.rollout.endings.Unfinished, exit code 6); re-running
resumes them. The dead node's containers are removed by the next run on that engine (leftover removal, by store
label).
"""

from __future__ import annotations

import asyncio
import io
import os
import platform
import secrets
import socket
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import ray
import ray.exceptions
from pydantic import BaseModel, ConfigDict

from arex.envs.runtime import Env, load_env
from arex.errors import ArexError, UserInputError
from arex.hashing import bytes_sha256
from arex.record.storage import STORE_ENV, write_error
from arex.record.trajectory import RecordError, RoundEnd
from arex.record.url_store import Remote, is_url, url_of
from arex.rollout.agent import Rollout
from arex.rollout.batch import (
    KEPT,
    UNREADABLE,
    Progress,
    config_hash,
    gather,
    record_path,
    rollout_key,
    summarize,
    write_summary,
)
from arex.rollout.config import RolloutConfig, Slot
from arex.rollout.endings import INFRA
from arex.rollout.ray_actors import ProgressBoard, RayLimiter, pinned, teacher_limit
from arex.sandbox import SandboxConfig, SandboxError, backend_class
from arex.specs import GradeResult, TeacherIdentity, Usage
from arex.teacher.client import TeacherClient, TeacherConfig

MARKER = ".arex-cluster-store"
"""The file the driver writes in the store; every task reads it back to prove it sees the store."""
IMAGES = ".arex-images"
NODE_LOST = "node lost"
"""How the reason of a rollout whose node (or worker) died under it begins."""


class RemoteJob(BaseModel):
    """Everything one rollout task needs, besides its env's packed folder."""

    model_config = ConfigDict(frozen=True)

    env_sha: str
    env_name: str
    sample: int
    key: str
    config_hash: str
    path: str
    store: str
    marker: str
    teacher: TeacherConfig
    base_url: str | None
    identity: TeacherIdentity
    rollout: RolloutConfig
    sandbox: SandboxConfig
    images: dict[str, str]
    """Image name → its saved copy under <store>/.arex-images/, for a node that lacks it."""


# -- the driver ---------------------------------------------------------------------------------
class RayExecutor:
    name = "ray"
    runs_variants = False

    def __init__(self, address: str = "auto", cpus_per_rollout: float = 1.0):
        self.address, self.cpus = address, cpus_per_rollout
        self.placements: dict[str, dict] = {}
        """Rollout key → {node, pid} of the task running it (from its start event)."""

    def connect(self) -> None:
        """Join the cluster at the address; UserInputError at once if nothing answers there, `auto`'s
        cluster included (Ray itself waits minutes on a dead address, then ends the process)."""
        if ray.is_initialized():
            return
        try:
            _reachable(self.address, _resolved(self.address))
            ray.init(address=self.address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserInputError(
                f"no Ray cluster at --address {self.address} ({str(exc).splitlines()[0][:200]}); "
                "start one with `ray start --head` (workers: `ray start --address HEAD:6379`) "
                "or pass --address HOST:PORT"
            ) from None

    def regrader(self, store: Path) -> "RayRegrader":
        self.connect()
        return RayRegrader(Path(store).resolve(), self.cpus)

    async def run_locked(
        self,
        envs: list[Env],
        teacher_config,
        rollout_config,
        sandbox_config,
        out: Path,
        samples: int,
        concurrency: int,
        base_url,
        console,
        shared,
    ) -> dict:
        self.connect()
        started = time.monotonic()
        teacher = TeacherClient(teacher_config, base_url=base_url)
        try:
            identity = await teacher.identity()
        finally:
            await teacher.close()
        store = Path(out).resolve()
        # a store at a URL: no shared path; each task works on its node's mirror (arex.record.url_store)
        url = url_of(store)
        marker, images = (
            "" if url else mark_store(store),
            await asyncio.to_thread(save_images, envs, store, sandbox_config.backend),
        )
        images = await asyncio.to_thread(share_images, images, Remote(url, mirror=store)) if url and images else images
        packs = {env.id: pack_env(env) for env in envs}
        chash = config_hash(teacher_config, rollout_config)
        common = dict(
            config_hash=chash,
            store=url or str(store),
            marker=marker,
            teacher=teacher_config,
            base_url=base_url,
            identity=identity,
            rollout=rollout_config,
            sandbox=sandbox_config,
            images=images,
        )
        jobs = []
        for env in envs:
            for sample in range(samples):
                key = rollout_key(env, chash, sample)
                # a URL store: relative to it
                record = record_path(Path(), env, key).as_posix() if url else str(record_path(store, env, key))
                job = RemoteJob(
                    env_sha=packs[env.id][0], env_name=env.dir.name, sample=sample, key=key, path=record, **common
                )
                jobs.append((job, record_path(out, env, key), env.id))
        node = ray.get_runtime_context().get_node_id()
        board = ProgressBoard.options(scheduling_strategy=pinned(node)).remote()
        limiter = RayLimiter(
            teacher_limit(teacher.base_url, teacher_config.concurrency, teacher_config.timeout_s, node), ""
        )
        progress = shared[1] or Progress(total=0)
        progress.total = len(jobs)
        run = _Run(
            self,
            progress,
            board,
            limiter,
            asyncio.Semaphore(concurrency),
            {k: ray.put(blob) for k, (_, blob) in packs.items()},
        )
        results, usage = await run.all(jobs, console)
        if url:  # the records as the tasks uploaded them, for the summary
            await asyncio.to_thread(
                Remote(url, mirror=store).pull, "", lambda rel: rel.endswith(".jsonl") and rel.count("/") == 1
            )
        summary = summarize(results, out, time.monotonic() - started, usage.model_dump())
        summary["nodes_lost"] = sorted(r["key"] for r in results if r.get("reason", "").startswith(NODE_LOST))
        return write_summary(summary, out)


def _resolved(address: str) -> str:
    """HOST:PORT of the cluster `auto` names (RAY_ADDRESS, or the last one `ray start` set up here);
    ConnectionError if there is none; any other address as it is."""
    if address != "auto":
        return address
    from ray._private.services import canonicalize_bootstrap_address  # how ray.init resolves `auto`

    return canonicalize_bootstrap_address(address) or address


def _refused(host_port: str, timeout: float = 10) -> str | None:
    """Why HOST:PORT does not accept a connection, or None if it does (or is no HOST:PORT)."""
    host, _, port = host_port.rpartition(":")
    if not host or "://" in host_port or not port.isdigit():
        return None  # a ray:// client address: ray.init says what is wrong
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        return str(exc.strerror or exc)
    return None


def _reachable(address: str, host_port: str) -> None:
    """UserInputError naming --address if the cluster it names (at `host_port`) does not accept connections."""
    problem = _refused(host_port)
    if problem is not None:
        port = host_port.rpartition(":")[2]
        at = address if address == host_port else f"{address} ({host_port})"
        raise UserInputError(
            f"no Ray cluster answers at --address {at} ({problem}); "
            f"start the head with `ray start --head --port {port}` or fix --address"
        )


GONE_CHECKS = 3
"""Refused connections in a row, a second apart, that mean the cluster's GCS is gone. Ray ends the
driver's process 60 s after losing it, so the batch ends first: its summary written, its message said."""


async def _gone(gcs: str) -> str:
    """Returns why, once the cluster's GCS at `gcs` (HOST:PORT) has refused GONE_CHECKS connections in a row."""
    misses, problem = 0, ""
    while misses < GONE_CHECKS:
        await asyncio.sleep(1.0)
        problem = await asyncio.to_thread(_refused, gcs, 5) or ""
        misses = misses + 1 if problem else 0
    return problem


def _infra(reason: str) -> dict:
    """The ending of a rollout whose task did not return it (its record stays open, to be resumed)."""
    return {"status": INFRA, "reason": reason, "rounds": 0, "tokens": 0, "cost_usd": 0.0}


class _Run:
    """One batch on the cluster: submits the tasks, follows their events, collects their ends."""

    def __init__(
        self,
        executor: RayExecutor,
        progress: Progress,
        board,
        limiter: RayLimiter,
        gate: asyncio.Semaphore,
        blobs: dict,
    ):
        self.executor, self.progress, self.board, self.limiter, self.gate, self.blobs = (
            executor,
            progress,
            board,
            limiter,
            gate,
            blobs,
        )
        self.usage = Usage()
        self.gone, self.why = asyncio.Event(), ""

    async def all(self, jobs: list, console) -> tuple[list[dict], Usage]:
        follower = asyncio.create_task(self._follow())
        watch = asyncio.create_task(self._watch(ray.get_runtime_context().gcs_address))
        try:
            results = await gather([self.one(job, path, env_id) for job, path, env_id in jobs], self.progress, console)
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
            last = asyncio.ensure_future(self.board.drain.remote())
            await asyncio.wait({last, watch}, return_when=asyncio.FIRST_COMPLETED)  # a dead cluster answers never
            for task in (last, watch):
                task.cancel()
            await asyncio.gather(last, watch, return_exceptions=True)
            if last.done() and not last.cancelled() and last.exception() is None:
                self._apply(last.result())
        return results, self.usage

    async def _watch(self, gcs: str) -> None:
        """Set `gone` once the cluster's GCS stops answering (its head node died): every rollout in
        flight then ends as node lost, and the ones not started yet are not started."""
        why = await _gone(gcs)
        self.why = f"the Ray cluster at {gcs} stopped answering: {why}"
        self.gone.set()

    async def one(self, job: RemoteJob, path: Path, env_id: str) -> dict:
        result = {"env": env_id, "sample": job.sample, "key": job.key, "path": str(path)}
        async with self.gate:
            if self.gone.is_set():
                outcome = _infra(f"not started: {self.why}; re-run to run it")
            else:
                task = rollout_task.options(num_cpus=self.executor.cpus, max_retries=0, scheduling_strategy="SPREAD")
                outcome = await self._outcome(task.remote(job, self.blobs[env_id], self.board, self.limiter))
        self.progress.done += 1
        usage = outcome.pop("usage", None)
        if usage:
            self.usage = Usage(**{k: getattr(self.usage, k) + v for k, v in usage.items()})
        return {**result, **outcome}

    async def _outcome(self, ref) -> dict:
        """What the task of `ref` returned, or a node-lost ending if its worker, its node or the whole
        cluster died under it."""
        waiting, gone = asyncio.ensure_future(ref), asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                return _infra(f"{NODE_LOST} ({self.why}); re-run to resume")
            return waiting.result()
        except asyncio.CancelledError:
            waiting.cancel()
            if not self.gone.is_set():
                ray.cancel(ref)  # the rollout stops open, to be resumed (as a local one does)
            raise
        except ray.exceptions.RayTaskError as exc:  # raised by arex in the task: a full store, a user error
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            raise (cause if isinstance(cause, ArexError) else exc) from None
        except ray.exceptions.RayError as exc:  # the worker or its node died under the task
            return _infra(f"{NODE_LOST} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); re-run to resume")
        finally:
            gone.cancel()

    async def _follow(self) -> None:
        while True:
            self._apply(await self.board.drain.remote())
            await asyncio.sleep(0.2)

    def _apply(self, events: list[dict]) -> None:
        """The local table's figures from the tasks' events (tokens and cost: each rollout's latest)."""
        p = self.progress
        for e in events:
            if e["kind"] == "start":
                self.executor.placements[e["key"]] = {"node": e["node"], "pid": e["pid"], "host": e["host"]}
                continue
            p.note_round(e["key"], e["env"], e["tokens"], e["cost"], e["best"])


class RayRegrader:
    """`arex select --executor ray`: each re-grading a Ray task (still a fresh sandbox each), each
    env packed once; called from select's threads, `concurrency` at a time."""

    def __init__(self, store: Path, cpus: float):
        self.store, self.cpus = store, cpus
        self.lock = threading.Lock()
        self.packs: dict[Path, tuple[str, ray.ObjectRef, dict[str, str]]] = {}
        self.submitted = 0

    def _pack(self, env: Env, backend: str) -> tuple[str, ray.ObjectRef, dict[str, str]]:
        with self.lock:
            if env.dir not in self.packs:
                sha, blob = pack_env(env)
                self.packs[env.dir] = (sha, ray.put(blob), save_images([env], self.store, backend))
            self.submitted += 1
            return self.packs[env.dir]

    def __call__(self, env: Env, archive: Path, end: RoundEnd, sandbox: SandboxConfig) -> GradeResult:
        sha, blob, images = self._pack(env, sandbox.backend)
        task = regrade_task.options(num_cpus=self.cpus, max_retries=0, scheduling_strategy="SPREAD")
        # the folder select labels its sandboxes with (its --out), so that a killed select's next run
        # finds the re-grading containers its Ray tasks left, as it finds those it started itself
        label = os.environ.get(STORE_ENV, "")
        try:
            ref = task.remote(sha, env.dir.name, blob, images, str(Path(archive).resolve()), end, sandbox, label)
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # what env.regrade raised there (a bad snapshot, the sandbox)
            raise (exc.cause if isinstance(exc.cause, Exception) else exc) from None
        except ray.exceptions.RayError as exc:  # not cached as a drop: a re-run re-grades it
            raise SandboxError(
                f"{NODE_LOST} while re-grading ({type(exc).__name__}); re-run the same command to re-grade it"
            ) from None


# -- what travels to the nodes ------------------------------------------------------------------
def mark_store(store: Path) -> str:
    """Write a fresh marker into the store; the token every task checks it sees."""
    token = f"{platform.node()} {os.getpid()} {secrets.token_hex(8)}"
    try:
        (store / MARKER).write_text(token)
    except OSError as exc:
        raise write_error(exc, store / MARKER) from None
    return token


def check_store(store: str, token: str) -> None:
    """UserInputError naming the store if this node does not see the driver's store."""
    try:
        seen = (Path(store) / MARKER).read_text()
    except OSError:
        seen = None
    if seen != token:
        raise UserInputError(
            f"node {platform.node()} cannot see the trajectory store {store} "
            f"(its marker file {MARKER} is missing or another run's); "
            "put the store on storage every Ray node mounts at that same path (e.g. NFS) and pass it as --out"
        )


def pack_env(env: Env) -> tuple[str, bytes]:
    """The env folder as a gzipped tar (its sha256 names it in the node caches)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(env.dir, arcname=".", filter=lambda info: info if info.isfile() or info.isdir() else None)
    data = buffer.getvalue()
    return bytes_sha256(data)[:24], data


def env_cache() -> Path:
    return Path(os.environ.get("AREX_RAY_CACHE") or Path(tempfile.gettempdir()) / "arex-ray-cache")


def unpack_env(sha: str, name: str, blob: bytes) -> Path:
    """The env folder in this node's cache (unpacked once; a concurrent unpack of the same one is fine)."""
    target = env_cache() / "envs" / sha / name
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(scratch, filter="data")
    try:
        os.rename(scratch, target)
    except OSError:  # another task of this node unpacked it first
        if not target.is_dir():
            raise
    return target


def save_images(envs: list[Env], store: Path, backend: str) -> dict[str, str]:
    """Save each env image (ML envs' spec.image) once into <store>/.arex-images/, by image id."""
    names = sorted({image for env in envs if (image := getattr(env.spec, "image", ""))})
    images = backend_class(backend).images()
    if not names or images is None:  # a backend that builds no images runs only what its config names
        return {}
    saved = {}
    for name in names:
        image_id = images.id(name)
        if image_id is None:
            raise SandboxError(f"env image '{name}' is not on this machine; build it with: arex build-envs")
        path = store / IMAGES / f"{image_id.split(':')[-1]}.tar"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch = path.with_suffix(".tmp")
            with scratch.open("wb") as f:
                images.save(name, f)
            os.replace(scratch, path)
        saved[name] = str(path)
    return saved


def ensure_images(images: dict[str, str], backend: str, local: Callable[[str], str] = str) -> None:
    """Load each image this node's engine lacks from its saved copy on the store (`local`: a saved
    copy's path here, e.g. downloaded from a URL store)."""
    engine = backend_class(backend).images()
    if not images or engine is None:
        return
    for name, path in images.items():
        if engine.id(name) is None:
            with open(local(path), "rb") as f:
                engine.load(f)


# -- the task -------------------------------------------------------------------------------------
_pruned: set[str] = set()


@ray.remote(max_retries=0)
def rollout_task(job: RemoteJob, blob: bytes, board, limiter: RayLimiter) -> dict:
    """One rollout on this node; its End (plus `usage`), or an UNREADABLE line like the local path's."""
    return asyncio.run(_play(job, blob, board, limiter))


async def _play(job: RemoteJob, blob: bytes, board, limiter: RayLimiter) -> dict:
    node = ray.get_runtime_context().get_node_id()
    path = await asyncio.to_thread(_record_path, job)
    os.environ[STORE_ENV] = job.store  # the sandboxes carry the store's label, for leftover removal
    await asyncio.to_thread(_prepare_node, job)
    env = load_env(unpack_env(job.env_sha, job.env_name, blob))
    board.note.remote({"kind": "start", "key": job.key, "node": node, "pid": os.getpid(), "host": platform.node()})
    teacher = TeacherClient(job.teacher, base_url=job.base_url, limiter=RayLimiter(limiter.actor, node))
    rollout = Rollout(
        env, teacher, job.identity, job.rollout, job.sandbox, Slot(path, job.sample, job.key, job.config_hash)
    )
    rollout.on_round = lambda r, end: board.note.remote(
        {
            "kind": "round",
            "key": job.key,
            "env": env.id,
            "best": end.best.held_out,
            "tokens": r.ledger.tokens,
            "cost": r.ledger.cost,
        }
    )
    try:
        end = await rollout.run()
    except RecordError as exc:
        return {
            "status": UNREADABLE,
            "reason": str(exc),
            "rounds": 0,
            "tokens": 0,
            "cost_usd": 0.0,
            "usage": teacher.usage.model_dump(),
        }
    except OSError as exc:
        raise write_error(exc, path, KEPT) from None
    finally:
        await teacher.close()
    return {**end.model_dump(exclude={"type"}), "usage": teacher.usage.model_dump()}


@ray.remote(max_retries=0)
def regrade_task(
    sha: str,
    name: str,
    blob: bytes,
    images: dict[str, str],
    archive: str,
    end: RoundEnd,
    sandbox: SandboxConfig,
    label: str = "",
) -> GradeResult:
    # a worker process is reused across tasks: a rollout task before this one left its own store here
    if label:
        os.environ[STORE_ENV] = label
    else:
        os.environ.pop(STORE_ENV, None)
    if not Path(archive).is_file():
        raise UserInputError(
            f"node {platform.node()} cannot see {archive}; "
            "put the trajectory store on storage every Ray node mounts at that same path"
        )
    ensure_images(images, sandbox.backend)
    return load_env(unpack_env(sha, name, blob)).regrade(Path(archive), end, sandbox)


def _record_path(job: RemoteJob) -> Path:
    """Where this task writes its record: the shared store, once its marker proves this node sees
    it; or, for a store at a URL, this node's mirror, holding the record as the URL has it (resume)."""
    if not is_url(job.store):
        check_store(job.store, job.marker)
        return Path(job.path)
    remote = Remote(job.store)
    remote.check()  # one sentence naming the URL if this node cannot reach it
    return remote.pull_record(job.path)


def share_images(images: dict[str, str], remote: Remote) -> dict[str, str]:
    """A URL store's copies of the saved images: uploaded once; name → path relative to the URL."""
    there = remote.listing(IMAGES)
    shared = {}
    for name, path in images.items():
        rel = f"{IMAGES}/{Path(path).name}"
        if rel not in there:
            remote.upload(Path(path), rel)
        shared[name] = rel
    return shared


def _prepare_node(job: RemoteJob) -> None:
    """Once per worker process and store: remove what dead runs left on this engine; load missing images."""
    if job.store not in _pruned:
        backend_class(job.sandbox.backend).cleanup(store=job.store)
        _pruned.add(job.store)
    ensure_images(job.images, job.sandbox.backend, Remote(job.store).fetch if is_url(job.store) else str)
