"""Docker backend: one long-lived container per sandbox, commands run with `docker exec`.

Isolation: no network, an unprivileged user, all capabilities dropped, no-new-privileges, memory
(no swap) / CPU / pids / file-size limits, and an init process that reaps zombies (execd.INIT).

Per-command timeouts kill the whole process tree: every exec carries a unique AREX_EXEC_ID in its
environment, which children inherit even when they start new sessions, so the killer finds them
all in /proc. If the tree cannot be killed (a fork bomb at the pids limit leaves no room to even
start the killer), the container is restarted: processes die, files stay.
"""

from __future__ import annotations

import atexit
import base64
import io
import os
import posixpath
import tarfile
import tempfile
import threading
import time
import uuid
import weakref
from collections import deque
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.types import Ulimit

from arex.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError, truncated_text
from arex.sandbox import execd
from arex.sandbox.execd import ExecServer, ServerGone
from arex.sandbox.execd import text as execd_text

LABEL = "arex.sandbox"
OWNER_LABEL = "arex.owner_pid"
FIX_ENGINE = "start it with: bash scripts/setup.sh (or: nohup dockerd --bridge=none --iptables=false &)"

# Kill every process whose environment carries the exec id; repeat while new ones appear. Exit 0
# when none remain, 1 if they keep coming, 3 if the pids limit is still (nearly) exhausted after.
_KILL_TREE = r"""
for pass in 1 2 3 4 5 6 7 8; do
  pids=""
  for p in /proc/[0-9]*; do
    grep -qsxzF "AREX_EXEC_ID=$1" "$p/environ" 2>/dev/null && pids="$pids ${p#/proc/}"
  done
  if [ -z "$pids" ]; then
    for d in /sys/fs/cgroup/pids /sys/fs/cgroup; do
      if [ -r $d/pids.current ] && [ -r $d/pids.max ] && [ "$(cat $d/pids.max)" != max ]; then
        [ $(( $(cat $d/pids.current) * 10 )) -ge $(( $(cat $d/pids.max) * 9 )) ] && exit 3
        break
      fi
    done
    exit 0
  fi
  kill -9 $pids 2>/dev/null
  sleep 0.05
done
exit 1
"""

# Sizes up to which files are read (_SERVED_FILE) and files or archives sent (_SERVED_TREE) through
# the command server; larger ones use the engine's archive API, not the server's memory.
_SERVED_FILE = 16 << 20
_SERVED_TREE = 8 << 20
_FORK_FAILED = "Resource temporarily unavailable"  # fork() = EAGAIN, as bash and python report it

_live: "weakref.WeakSet[DockerSandbox]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for sandbox in list(_live):
        sandbox.stop()


def docker_client(pool: int = 10) -> docker.DockerClient:
    """A client for the local engine, or SandboxError saying how to start one."""
    try:
        client = docker.from_env(timeout=120, max_pool_size=pool)
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"Docker engine is not reachable ({exc.__class__.__name__}); {FIX_ENGINE}") from None


_shared_client: tuple[int, docker.DockerClient] | None = None
_shared_lock = threading.Lock()


def sandbox_client() -> docker.DockerClient:
    """One client per process for all sandboxes: a new one costs a connection and a ping each.
    Its pool is large because every running sandbox may hold a connection at once."""
    global _shared_client
    with _shared_lock:
        if _shared_client is None or _shared_client[0] != os.getpid():
            _shared_client = (os.getpid(), docker_client(pool=64))
        return _shared_client[1]


class _Capped:
    """Keeps the head and tail of a stream, counts the rest."""

    def __init__(self, limit: int):
        self.head_limit = limit // 2
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.tail_limit = limit - self.head_limit
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= self.tail_limit:
                self.tail_len -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.text_and_cut()[1]

    def text(self) -> str:
        return self.text_and_cut()[0]

    def text_and_cut(self) -> tuple[str, bool]:
        tail = b"".join(self.tail)
        if self.total > self.head_limit + self.tail_limit:
            tail = tail[-self.tail_limit :]
        return truncated_text(bytes(self.head), tail, self.total)


class DockerSandbox(Sandbox):
    def __init__(self, config: SandboxConfig, name: str = "sandbox"):
        super().__init__(config, name)
        self._client: docker.DockerClient | None = None
        self._container = None
        self._oom_seen_ns = 0
        self._server: ExecServer | None = None
        self._server_broken = False
        self._server_lock = threading.Lock()
        self._memory = config.memory

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def id(self) -> str | None:
        return self._container.id if self._container is not None else None

    def start(self) -> None:
        if self._container is not None:
            return
        cfg = self.config
        client = self._client = sandbox_client()
        volumes = {}
        for mount in cfg.mounts:
            if not Path(mount.source).exists():
                raise SandboxError(f"Mount source '{mount.source}' does not exist (mount target {mount.target}).")
            volumes[str(Path(mount.source).resolve())] = {"bind": mount.target, "mode": "ro" if mount.read_only else "rw"}
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
            if cfg.exec_server:  # attached before start, so no reply (nor the GONE line) is missed
                self._server = ExecServer.attach(client.api, self._container.id)
            self._container.start()
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            self.stop()
            raise SandboxError(f"Could not start a sandbox from '{cfg.image}': {getattr(exc, 'explanation', None) or exc}") from None

    def _container_options(self, volumes: dict) -> dict:
        """Everything `containers.run` gets: the isolation and limits live here, in one place."""
        cfg = self.config
        return dict(
            image=cfg.image,
            # Our own init, holding the command server when it is on (see execd.INIT).
            command=execd.main_command(cfg.exec_server),
            stdin_open=cfg.exec_server,
            name=f"arex-{self.name}-{uuid.uuid4().hex[:10]}",
            detach=True,
            user=cfg.user,
            working_dir=cfg.workdir,
            network_mode="default" if cfg.network else "none",
            # Disabled networking still gets a fresh namespace holding only loopback, without
            # dockerd's per-start network hook (a re-exec of dockerd: ~90 ms of CPU per container).
            network_disabled=not cfg.network,
            log_config={"type": "none"},  # the server's replies go to us, not to a log file
            mem_limit=cfg.memory,
            memswap_limit=cfg.memory,
            nano_cpus=int(cfg.cpus * 1e9),
            pids_limit=cfg.pids_limit,
            ulimits=[Ulimit(name="fsize", soft=cfg.max_file_size, hard=cfg.max_file_size)],
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            environment=dict(cfg.env),
            volumes=volumes,
            labels={LABEL: "1", OWNER_LABEL: str(os.getpid()), "arex.name": self.name},
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

    # -- commands --------------------------------------------------------------------------
    def exec(self, command, timeout=None, cwd=None, env=None, stdin=None) -> ExecResult:
        container = self._require()
        cfg = self.config
        timeout = cfg.timeout_s if timeout is None else timeout
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        exec_id = uuid.uuid4().hex
        environment = {**cfg.env, **(env or {}), "AREX_EXEC_ID": exec_id}
        if cfg.exec_server:
            served = self._exec_served(argv, timeout, cwd or cfg.workdir, environment, stdin, exec_id)
            if served is not None:
                return served
        if stdin is not None:
            stdin_path = f"/tmp/.arex-stdin-{exec_id}"
            self.write_file(stdin_path, stdin, mode=0o600)
            argv = ["bash", "-c", 'f=$1; shift; exec "$@" < "$f"', "arex-stdin", stdin_path, *argv]
        api = self._client.api
        started = time.monotonic()
        started_ns = time.time_ns()
        try:
            handle = api.exec_create(container.id, argv, environment=environment, workdir=cwd or cfg.workdir, user=cfg.user)
            stream = api.exec_start(handle["Id"], stream=True, demux=True)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise self._dead("exec", exc) from None

        out, err = _Capped(cfg.output_limit), _Capped(cfg.output_limit)
        flooded, finished = threading.Event(), threading.Event()

        def pump() -> None:
            # Keeps draining after a flood: a stalled stream blocks the engine's other execs.
            try:
                for chunk_out, chunk_err in stream:
                    if chunk_out:
                        out.add(chunk_out)
                    if chunk_err:
                        err.add(chunk_err)
                    if out.total + err.total > cfg.output_kill and not flooded.is_set():
                        flooded.set()
                        finished.set()
            except Exception:  # noqa: BLE001 - the stream ends abruptly when the tree is killed
                pass
            finished.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        finished.wait(timeout)
        killed_for = "output_limit" if flooded.is_set() else ("timeout" if not finished.is_set() else None)
        restarted = False
        if killed_for:
            restarted = self._kill_tree(exec_id)
            reader.join(10)
        exit_code = None if killed_for else self._exit_code(handle["Id"])
        if not killed_for and _FORK_FAILED in err.text():
            # It ran into the pids limit and may have left a process storm behind: end it.
            restarted = self._kill_tree(exec_id)
        duration = time.monotonic() - started
        if killed_for:
            status = killed_for
            exit_code = 124 if killed_for == "timeout" else 137
        elif exit_code == 0:
            status = "ok"
        elif exit_code == 137 and self._oom_since(started_ns):
            status = "oom"
        else:
            status = "error"
        if stdin is not None:
            self._quiet(f"rm -f /tmp/.arex-stdin-{exec_id}")
        return ExecResult(
            status=status,
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=round(duration, 4),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            sandbox_restarted=restarted,
        )

    def _exec_served(self, argv, timeout, cwd, environment, stdin, exec_id) -> ExecResult | None:
        """Run through the in-sandbox server; None means "use plain docker exec instead"."""
        server = self._ensure_server()
        if server is None:
            return None
        cfg = self.config
        if isinstance(stdin, str):
            stdin = stdin.encode()
        request = {
            "id": exec_id, "argv": argv, "cwd": cwd, "env": environment, "timeout": timeout, "marker": exec_id,
            "stdin": base64.b64encode(stdin).decode() if stdin is not None else None,
            "keep": cfg.output_limit, "kill_at": cfg.output_kill,
        }
        started_ns = time.time_ns()
        try:
            reply = server.run(request, wait_s=timeout + 60)
        except ServerGone as exc:
            if exc.ran:
                # It started but could not be supervised (typically the pids limit): end it, report it.
                restarted = self._kill_tree(exec_id)
                return ExecResult(status="error", exit_code=137, stdout="", stderr=f"[arex: {exc}]", duration_s=round((time.time_ns() - started_ns) / 1e9, 4), sandbox_restarted=restarted)
            if "spawn failed" in str(exc) or not server.alive:
                # Nothing ran (no thread or process could be made, or the server is gone): plain exec decides.
                return None
            raise self._dead("exec through the command server", exc) from None
        stdout, out_cut = execd_text(reply["out"])
        stderr, err_cut = execd_text(reply["err"])
        code, killed = reply["exit_code"], reply["killed"]
        restarted = False
        if killed:
            status, code = killed, 124 if killed == "timeout" else 137
        elif code == 0:
            status = "ok"
        elif code == 137 and self._oom_since(started_ns):
            status = "oom"
        else:
            status = "error"
        if not killed and _FORK_FAILED in stderr:
            restarted = self._kill_tree(exec_id)
        return ExecResult(status=status, exit_code=code, stdout=stdout, stderr=stderr, duration_s=reply["seconds"],
                          stdout_truncated=out_cut, stderr_truncated=err_cut, sandbox_restarted=restarted)

    def _served_raw(self, argv: list[str], stdin: bytes | None = None, keep: int = 1 << 30, timeout: float = 120.0) -> tuple[int, bytes, str] | None:
        """A helper command through the server with its whole stdout as bytes; None if unavailable."""
        server = self._ensure_server()
        if server is None:
            return None
        exec_id = uuid.uuid4().hex
        request = {
            "id": exec_id, "argv": argv, "cwd": self.config.workdir, "env": {**self.config.env, "AREX_EXEC_ID": exec_id}, "timeout": timeout,
            "marker": exec_id, "stdin": base64.b64encode(stdin).decode() if stdin is not None else None, "keep": keep, "kill_at": keep,
        }
        try:
            reply = server.run(request, wait_s=timeout + 60)
        except ServerGone:
            return None
        if reply["killed"] or reply["out"][2] > len(base64.b64decode(reply["out"][0])) + len(base64.b64decode(reply["out"][1])):
            return None
        out = base64.b64decode(reply["out"][0]) + base64.b64decode(reply["out"][1])
        err, _ = execd_text(reply["err"])
        return reply["exit_code"], out, err

    def _file_op(self, request: dict) -> dict | None:
        """A file read or write done by the command server itself (see execd.file_op); None if
        the server is unavailable."""
        server = self._ensure_server()
        if server is None:
            return None
        try:
            return server.run({"id": uuid.uuid4().hex, **request}, wait_s=120)
        except ServerGone:
            return None

    def _ensure_server(self) -> ExecServer | None:
        if self._server_broken:
            return None
        with self._server_lock:
            if self._server is not None and self._server.alive:
                return self._server
            try:
                self._server = ExecServer.by_exec(self._client.api, self._require().id, self.config.user)
            except (docker.errors.APIError, requests.exceptions.RequestException, OSError):
                self._server_broken = True
                return None
            return self._server

    def _exit_code(self, handle: str) -> int:
        api = self._client.api
        for _ in range(100):  # the stream can close a moment before the exit code is recorded
            try:
                info = api.exec_inspect(handle)
            except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
                raise self._dead("exec", exc) from None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return info["ExitCode"]
            time.sleep(0.02)
        raise SandboxError(f"Sandbox '{self.name}': the engine reported no exit code for a finished command.")

    def _kill_tree(self, exec_id: str) -> bool:
        """Kill every process of one exec. Returns True if the container had to be restarted."""
        for _ in range(3):
            code = self._quiet(["sh", "-c", _KILL_TREE, "arex-kill", exec_id])
            if code == 0:
                return False
            time.sleep(0.2)
        # No room to start the killer (pids limit reached) or the tree keeps respawning.
        container = self._require()
        try:
            container.restart(timeout=0)
        except docker.errors.APIError as exc:
            raise self._dead("restart after a runaway command", exc) from None
        with self._server_lock:  # the attached server died with the restart; the next use starts one by exec
            if self._server is not None:
                self._server.close()
                self._server = None
        return True

    def _quiet(self, argv) -> int | None:
        """Run a helper command, ignoring its output. Returns its exit code, None if it could not start."""
        api = self._client.api
        try:
            handle = api.exec_create(self._container.id, argv, user=self.config.user, workdir="/")
            api.exec_start(handle["Id"])
            return api.exec_inspect(handle["Id"]).get("ExitCode")
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return None

    def _oom_since(self, since_ns: int) -> bool:
        """Did the kernel OOM-kill a process in this container since `since_ns`?

        Each OOM event is attributed once, so a late event cannot mark a later command."""
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

    # -- files -----------------------------------------------------------------------------
    def _put(self, directory: str, archive) -> None:
        container = self._require()
        try:
            container.put_archive(directory, archive)
        except docker.errors.NotFound:
            if self._quiet(["mkdir", "-p", directory]) != 0:
                raise PermissionError(f"Cannot create folder '{directory}' in sandbox '{self.name}'.") from None
            if hasattr(archive, "seek"):
                archive.seek(0)
            self._put(directory, archive)
        except docker.errors.APIError as exc:
            if exc.status_code in (400, 403, 500) and "read-only" in str(exc).lower():
                raise PermissionError(f"'{directory}' is read-only in sandbox '{self.name}'.") from None
            raise self._dead("file upload", exc) from None

    def _owner(self) -> tuple[int, int]:
        uid, _, gid = self.config.user.partition(":")
        return int(uid), int(gid or uid)

    def write_file(self, path: str, data, mode: int = 0o644) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        path = posixpath.join(self.config.workdir, path)
        if self.config.exec_server and len(data) <= _SERVED_TREE:
            done = self._file_op({"op": "write", "path": path, "mode": mode, "data": base64.b64encode(data).decode()})
            if done is not None and done["done"]:
                return
            if done is not None and done.get("errno") == "EROFS":
                raise PermissionError(f"'{path}' is read-only in sandbox '{self.name}'.")
            # anything else (e.g. a folder the user may not write): the engine's archive API decides
        uid, gid = self._owner()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
            info = tarfile.TarInfo(posixpath.basename(path))
            info.size, info.mode, info.mtime, info.uid, info.gid = len(data), mode, int(time.time()), uid, gid
            tar.addfile(info, io.BytesIO(data))
        buffer.seek(0)
        self._put(posixpath.dirname(path) or "/", buffer)

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        container = self._require()
        path = posixpath.join(self.config.workdir, path)
        if self.config.exec_server:
            # Small files only: a large one goes through the engine's archive API, not the server's memory.
            cap = min(max_bytes if max_bytes is not None else _SERVED_FILE, _SERVED_FILE)
            done = self._file_op({"op": "read", "path": path, "cap": cap}) or {"done": False}
            if done["done"]:
                data = base64.b64decode(done["data"])  # at most cap + 1 bytes
                if len(data) <= cap:
                    return data
                if max_bytes is not None and max_bytes <= cap:
                    raise ValueError(f"'{path}' is over the {max_bytes}-byte cap.")
            if done.get("errno") in ("ENOENT", "ENOTDIR"):
                raise FileNotFoundError(f"No file '{path}' in sandbox '{self.name}'.")
            if done.get("kind") == "dir":
                raise IsADirectoryError(f"'{path}' is a folder in sandbox '{self.name}'; use copy_out.")
        try:
            stream, stat = container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"No file '{path}' in sandbox '{self.name}'.") from None
        except docker.errors.APIError as exc:
            raise self._dead("file download", exc) from None
        if stat.get("mode", 0) & (1 << 31):  # os.ModeDir in Go's FileMode
            raise IsADirectoryError(f"'{path}' is a folder in sandbox '{self.name}'; use copy_out.")
        if max_bytes is not None and stat.get("size", 0) > max_bytes:
            raise ValueError(f"'{path}' is {stat['size']} bytes, over the {max_bytes}-byte cap.")
        with tempfile.SpooledTemporaryFile(max_size=64 << 20) as spool:
            for chunk in stream:
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r|", encoding="utf-8") as tar:
                for member in tar:
                    if member.isfile():
                        return tar.extractfile(member).read()
        raise FileNotFoundError(f"'{path}' in sandbox '{self.name}' is not a regular file.")

    def copy_in(self, host_dir, sandbox_dir: str) -> None:
        host_dir = Path(host_dir)
        if not host_dir.is_dir():
            raise FileNotFoundError(f"Host folder '{host_dir}' does not exist.")
        uid, gid = self._owner()

        def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            return info

        sandbox_dir = posixpath.join(self.config.workdir, sandbox_dir)
        with tempfile.SpooledTemporaryFile(max_size=_SERVED_TREE) as spool:
            with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
                for child in sorted(host_dir.iterdir()):
                    tar.add(child, arcname=child.name, filter=owned)
            size = spool.tell()
            spool.seek(0)
            # A small tree goes through the command server (a tar process, ~5 ms of CPU) rather
            # than the engine's archive API (~50 ms); a large one is not held in the server's memory.
            if self.config.exec_server and size <= _SERVED_TREE and self._untar_served(sandbox_dir, spool.read()):
                return
            spool.seek(0)
            self._put(sandbox_dir, spool)

    def _untar_served(self, sandbox_dir: str, archive: bytes) -> bool:
        """Unpack a tar into a folder as the sandbox user. False: let the archive API decide."""
        script = 'mkdir -p -- "$1" && exec tar -x -p -f - -C "$1"'
        done = self._served_raw(["sh", "-c", script, "arex-untar", sandbox_dir], stdin=archive, keep=1 << 16)
        if done is None:
            return False
        code, _, err = done
        if code != 0 and "Read-only file system" in err:
            raise PermissionError(f"'{sandbox_dir}' is read-only in sandbox '{self.name}'.")
        return code == 0

    def copy_out(self, sandbox_dir: str, host_dir, max_bytes: int | None = None) -> None:
        container = self._require()
        sandbox_dir = posixpath.join(self.config.workdir, sandbox_dir).rstrip("/") or "/"
        if self.config.exec_server:
            cap = min((max_bytes if max_bytes is not None else 1 << 30) + 1, 64 << 20)
            done = self._served_raw(["tar", "-C", sandbox_dir, "-cf", "-", "."], keep=cap, timeout=300)
            if done is not None and done[0] == 0 and len(done[1]) < cap:
                if max_bytes is not None and len(done[1]) > max_bytes:
                    raise ValueError(f"'{sandbox_dir}' is over the {max_bytes}-byte cap for copy_out.")
                Path(host_dir).mkdir(parents=True, exist_ok=True)
                with tarfile.open(fileobj=io.BytesIO(done[1]), mode="r") as tar:
                    members = [m for m in tar.getmembers() if m.name not in (".", "./")]
                    for m in members:
                        m.name = m.name.removeprefix("./")
                    tar.extractall(Path(host_dir), members=members, filter="data")
                return
            if done is not None and "No such file" in done[2]:
                raise FileNotFoundError(f"No folder '{sandbox_dir}' in sandbox '{self.name}'.")
        try:
            stream, stat = container.get_archive(sandbox_dir + "/.")
        except docker.errors.NotFound:
            raise FileNotFoundError(f"No folder '{sandbox_dir}' in sandbox '{self.name}'.") from None
        except docker.errors.APIError as exc:
            raise self._dead("folder download", exc) from None
        host_dir = Path(host_dir)
        host_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as spool:
            size = 0
            for chunk in stream:
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise ValueError(f"'{sandbox_dir}' is over the {max_bytes}-byte cap for copy_out.")
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r", encoding="utf-8") as tar:
                members = []
                for member in tar.getmembers():
                    parts = member.name.split("/")[1:]  # drop the leading "." folder
                    if not parts or parts == [""]:
                        continue
                    member.name = "/".join(parts)
                    members.append(member)
                tar.extractall(host_dir, members=members, filter="data")


def orphans(client: docker.DockerClient, all_owners: bool = False) -> list:
    """arex sandbox containers whose owning process is gone (or all of them)."""
    found = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        owner = container.labels.get(OWNER_LABEL, "")
        if all_owners or not (owner.isdigit() and _alive(int(owner))):
            found.append(container)
    return found


def prune(all_owners: bool = False) -> list[str]:
    """Remove arex sandbox containers left by crashed processes (or all of them). Returns names."""
    removed = []
    for container in orphans(docker_client(), all_owners):
        try:
            container.remove(force=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True

