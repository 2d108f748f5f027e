"""The Docker sandbox: one long-lived container per sandbox; every command goes through the command
server inside it (box/server.py) and the runner (runner.c).

Isolation: no network; the root filesystem read-only, with size- and inode-bounded tmpfs for the
workdir, home and /tmp (so what a sandbox can write is bounded, and counts against its memory);
all capabilities dropped but the three the serving processes need (setuid, setgid, kill);
no-new-privileges; memory (no swap) / CPU / pids limits. Our init and the command server run as
root, every command as the unprivileged user: the agent cannot signal, trace or open the
processes that serve and judge it. The runner makes each command's process tree its own (a child
subreaper), kills it whole on timeout, and reports CPU time, peak memory and exit status from the
kernel.
"""

from __future__ import annotations

import atexit
import time
import uuid
import weakref
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from arex.sandbox import runtime
from arex.sandbox.base import JUDGE_AREA, Finding, SandboxConfig, SandboxError
from arex.sandbox.docker.client import FIX_ENGINE, labels, sandbox_client
from arex.sandbox.docker.diagnose import diagnose
from arex.sandbox.docker.images import DockerImages
from arex.sandbox.docker.leftovers import prune
from arex.sandbox.docker.runtime import runtime_dir
from arex.sandbox.execd import ExecServer
from arex.sandbox.execd import text as execd_text
from arex.sandbox.served import ServedSandbox

# The only capabilities left, for the serving processes (root): drop to the agent's uid, kill its
# processes. Commands lose them when the runner drops to the agent's uid.
SERVING_CAPS = ["SETUID", "SETGID", "KILL"]

_live: "weakref.WeakSet[DockerSandbox]" = weakref.WeakSet()


@atexit.register
def stop_live() -> None:
    """Stop every sandbox of this backend this process started and has not stopped."""
    for sandbox in list(_live):
        sandbox.stop()


class DockerSandbox(ServedSandbox):
    def __init__(self, config: SandboxConfig, name: str = "sandbox"):
        super().__init__(config, name)
        self._client: docker.DockerClient | None = None
        self._container = None
        self._oom_seen_ns = 0
        self._server: ExecServer | None = None
        self._memory = config.memory + config.files_bytes

    # -- backend hooks ----------------------------------------------------------------------
    @classmethod
    def diagnose(cls, image: str) -> list[Finding]:
        return diagnose(image)

    @classmethod
    def cleanup(cls, store: str | None = None, all_owners: bool = False) -> list[str]:
        return prune(all_owners=all_owners, store=store)

    @classmethod
    def images(cls) -> DockerImages:
        return DockerImages()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def id(self) -> str | None:
        return self._container.id if self._container is not None else None

    def start(self) -> None:
        if self._container is not None:
            return
        cfg = self.config
        client = self._client = sandbox_client()
        volumes = {str(runtime_dir(client)): {"bind": runtime.TARGET, "mode": "ro"}}
        for mount in cfg.mounts:
            if not Path(mount.source).exists():
                raise SandboxError(f"Mount source '{mount.source}' does not exist (mount target {mount.target}).")
            volumes[str(Path(mount.source).resolve())] = {
                "bind": mount.target,
                "mode": "ro" if mount.read_only else "rw",
            }
        try:
            self._container = client.containers.create(**self._container_options(volumes))
        except docker.errors.ImageNotFound:
            hint = "bash scripts/build_base_image.sh" if cfg.image.startswith("arex-base") else "arex build-envs"
            raise SandboxError(f"Sandbox image '{cfg.image}' not found; build it with: {hint}") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"Could not start a sandbox from '{cfg.image}': {exc.explanation or exc}") from None
        except requests.exceptions.RequestException as exc:
            raise SandboxError(f"Docker engine is not reachable ({exc.__class__.__name__}); {FIX_ENGINE}") from None
        _live.add(self)
        try:
            self._server = ExecServer.attach(client.api, self._container.id)  # before start: no reply missed
            self._container.start()
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            self.stop()
            raise SandboxError(
                f"Could not start a sandbox from '{cfg.image}': {getattr(exc, 'explanation', None) or exc}"
            ) from None
        if cfg.seed:
            self._seed(cfg.seed)

    def _seed(self, seed: str) -> None:
        reply = self._helper(["cp", "-a", "--no-preserve=ownership", f"{seed}/.", self.config.workdir])
        if reply["exit_code"] != 0:
            self.stop()
            raise SandboxError(
                f"Image '{self.config.image}' has no usable workspace at {seed}: "
                f"{execd_text(reply['err'])[0].strip()[:300]}"
            )

    def _container_options(self, volumes: dict) -> dict:
        """Everything `containers.create` gets: the isolation and limits live here, in one place."""
        cfg = self.config
        uid, gid = cfg.uid_gid

        def area(size: int, mode: str) -> str:  # exec: compiled programs run from the workdir and /tmp
            return f"size={size},nr_inodes={cfg.inodes},uid={uid},gid={gid},mode={mode},exec"

        return dict(
            image=cfg.image,
            command=runtime.main_command(uid),
            stdin_open=True,
            user="0:0",  # init and server only; every command runs as cfg.user (see module doc)
            name=f"arex-{self.name}-{uuid.uuid4().hex[:10]}",
            detach=True,
            working_dir="/",
            network_mode="default" if cfg.network else "none",
            # Disabled networking still gets a fresh namespace holding only loopback, without
            # dockerd's per-start network hook (a re-exec of dockerd: ~90 ms of CPU per container).
            network_disabled=not cfg.network,
            log_config={"type": "none"},  # the server's replies go to us, not to a log file
            read_only=True,
            tmpfs={
                cfg.workdir: area(cfg.disk, "0755"),
                cfg.home: area(cfg.scratch, "0755"),
                "/tmp": area(cfg.scratch, "1777"),
                **_judge_area(cfg),
            },
            mem_limit=cfg.memory + cfg.files_bytes,
            memswap_limit=cfg.memory + cfg.files_bytes,
            nano_cpus=int(cfg.cpus * 1e9),
            pids_limit=cfg.pids_limit,
            cap_drop=["ALL"],
            cap_add=list(SERVING_CAPS),
            security_opt=["no-new-privileges"],
            environment=dict(cfg.env),
            volumes=volumes,
            labels=labels(self.name),
        )

    def set_memory_limit(self, memory: int) -> None:
        container = self._require()
        if memory == self._memory:
            return  # an engine round trip (runc update) saved: graders set the same limit every time
        try:
            container.update(mem_limit=memory, memswap_limit=memory)
        except docker.errors.APIError as exc:
            raise self._dead("memory limit update", exc) from None
        self._memory = memory

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        container, self._container = self._container, None
        _live.discard(self)
        if container is None:
            return
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            pass  # the engine is gone; `arex sandbox prune` removes the leftover later

    def _require(self):
        if self._container is None:
            raise SandboxError(f"Sandbox '{self.name}' is not running; call start() or use it as a context manager.")
        return self._container

    def _dead(self, what: str, exc: Exception) -> SandboxError:
        state = "unknown"
        try:
            self._container.reload()
            state = self._container.status
        except docker.errors.NotFound:
            state = "removed"
        except Exception:  # noqa: BLE001 - engine unreachable: report what we know
            pass
        return SandboxError(f"Sandbox '{self.name}' failed during {what} (container {state}): {exc}")

    # -- out-of-memory kills ---------------------------------------------------------------
    def _oom_mark(self) -> int:
        return time.time_ns()

    def _oom_since(self, since_ns: int) -> bool:
        """Did the kernel OOM-kill a process in this container since `since_ns` (the engine's oom
        events)? Each event is attributed once, so a late event cannot mark a later command."""
        try:
            events = self._client.events(
                since=since_ns // 1_000_000_000,
                until=int(time.time()) + 1,
                filters={"container": self._container.id, "event": "oom"},
                decode=True,
            )
            fresh = [e["timeNano"] for e in events if e.get("timeNano", 0) > max(since_ns, self._oom_seen_ns)]
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return False
        if fresh:
            self._oom_seen_ns = max(fresh)
        return bool(fresh)


def _judge_area(cfg: SandboxConfig) -> dict[str, str]:
    """The judge's private tmpfs, if asked for: only its uid may enter (mode 0700), and the sandbox
    user can neither read it nor fill it."""
    if not cfg.judge_area:
        return {}
    uid = cfg.judge_uid
    return {JUDGE_AREA: f"size={cfg.judge_area},nr_inodes=4096,uid={uid},gid={uid},mode=0700,exec"}
