"""A command server inside the sandbox, so a command costs a fork, not a `docker exec`.

`docker exec` spawns runc for every command: ~50 ms of CPU on a small machine, which is what
limits how many rollouts a two-core host can drive. Instead, each sandbox runs SERVER (python3, as
the sandbox user) as its main process and sends it requests over the container's attached stdin;
it answers on stdout. If that server ends, one is started with `docker exec` instead. The server
enforces the same rules as the plain path: a wall-clock timeout that kills the whole tree (process
group and the AREX_EXEC_ID marker, found in /proc), output caps, an output flood kill. If the server cannot be used (no python3, it died, or it cannot fork because
the pids limit is exhausted), the backend falls back to plain `docker exec` for that command.
"""

from __future__ import annotations

import base64
import json
import queue
import socket
import struct
import threading
from typing import Any

SERVER = r'''
import base64, ctypes, errno, json, os, signal, stat, subprocess, sys, threading, time

# Not dumpable: the sandboxed code runs as the same uid, and could otherwise open this process's
# pipes through /proc/<pid>/fd (or ptrace it) and forge replies. Commands are exec'd, which makes
# them dumpable again.
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0

out_lock = threading.Lock()

def reply(msg):
    data = (json.dumps(msg) + "\n").encode()
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

def kill_marked(marker, proc):
    try:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    needle = ("AREX_EXEC_ID=" + marker).encode()
    for _ in range(8):
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                pass
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)

def run(req):
    started = time.monotonic()
    env = dict(os.environ)
    env.update(req["env"])
    try:
        proc = subprocess.Popen(req["argv"], cwd=req["cwd"], env=env, stdin=subprocess.PIPE if req["stdin"] is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError as exc:
        text = base64.b64encode(f"{exc}\n".encode()).decode()
        reply({"id": req["id"], "exit_code": 127, "out": ["", "", 0], "err": [text, "", len(text)], "killed": None, "seconds": 0.0})
        return
    except OSError as exc:
        reply({"id": req["id"], "error": f"spawn failed: {exc}"})
        return
    limit, kill_at = req["keep"], req["kill_at"]
    bufs = {"out": [bytearray(), bytearray(), 0], "err": [bytearray(), bytearray(), 0]}
    state = {"killed": None}
    lock = threading.Lock()

    def pump(stream, key):
        head, tail, _ = bufs[key]
        half = limit // 2
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            with lock:
                bufs[key][2] += len(chunk)
                room = half - len(head)
                if room > 0:
                    head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    tail += chunk
                    if len(tail) > limit - half:
                        del tail[: len(tail) - (limit - half)]
                if bufs["out"][2] + bufs["err"][2] > kill_at and state["killed"] is None:
                    state["killed"] = "output_limit"
                    kill_marked(req["marker"], proc)

    threads = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True), threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    if req["stdin"] is not None:
        def feed():
            try:
                proc.stdin.write(base64.b64decode(req["stdin"]))
                proc.stdin.close()
            except OSError:
                pass
        threading.Thread(target=feed, daemon=True).start()
    try:
        proc.wait(timeout=req["timeout"])
    except subprocess.TimeoutExpired:
        if state["killed"] is None:
            state["killed"] = "timeout"
        kill_marked(req["marker"], proc)
        proc.wait()
    if state["killed"] is None:
        # Background children may hold the pipes open: give them the same short grace as docker exec.
        for t in threads:
            t.join(2.0)
    else:
        for t in threads:
            t.join(5.0)
    msg = {"id": req["id"], "exit_code": proc.returncode if proc.returncode >= 0 else 128 - proc.returncode, "killed": state["killed"], "seconds": round(time.monotonic() - started, 4)}
    with lock:
        for key in ("out", "err"):
            head, tail, total = bufs[key]
            msg[key] = [base64.b64encode(bytes(head)).decode(), base64.b64encode(bytes(tail)).decode(), total]
    reply(msg)

def file_op(req):
    # Reads and writes of regular files, done by the server itself: no process to start. Anything
    # else (a folder, a FIFO, an error) is answered with done=False and left to the host's other paths.
    answer = {"id": req["id"], "done": False}
    try:
        if req["op"] == "write":
            os.makedirs(os.path.dirname(req["path"]) or "/", exist_ok=True)
            fd = os.open(req["path"], os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        else:
            fd = os.open(req["path"], os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                answer["kind"] = "dir" if stat.S_ISDIR(mode) else "other"
            elif req["op"] == "write":
                os.ftruncate(fd, 0)
                view = memoryview(base64.b64decode(req["data"]))
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, req["mode"])
                answer["done"] = True
            else:
                chunks, size = [], 0
                while size <= req["cap"]:
                    chunk = os.read(fd, min(1 << 20, req["cap"] + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                answer.update(done=True, data=base64.b64encode(b"".join(chunks)).decode())
        finally:
            os.close(fd)
    except Exception as exc:  # an OSError mostly; whatever it is, the host decides what to do next
        answer["errno"] = errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)
    reply(answer)

def guarded(req):
    if "op" in req:
        return file_op(req)
    try:
        run(req)
    except BaseException as exc:  # e.g. no thread or pipe left under a pids limit: say so, never go silent
        kill_marked(req["marker"], None)
        reply({"id": req["id"], "error": f"supervision failed: {exc}", "ran": True})

for line in sys.stdin.buffer:
    req = json.loads(line)
    try:
        threading.Thread(target=guarded, args=(req,), daemon=True).start()
    except RuntimeError as exc:
        reply({"id": req["id"], "error": f"spawn failed: {exc}"})
'''


class ServerGone(RuntimeError):
    """The in-sandbox server is not usable. `ran`: the command was started (do not run it again)."""

    def __init__(self, message: str, ran: bool = False):
        super().__init__(message)
        self.ran = ran


# The container's init (PID 1): it reaps every orphan (killed command trees end up here) and, with
# the server on, runs the server in a forked child whose stdin is attached before start (no
# `docker exec` is needed to launch it). When the server ends, the GONE line tells the host, which
# falls back to `docker exec`. It is not dumpable and, once no server needs them, its stdio is on
# /dev/null: nothing in the sandbox can reach the attached pipes (see SERVER). A generic init
# (docker's tini) would run as the sandbox user, dumpable, holding those pipes. -I -S: nothing is
# imported from the working folder, PYTHON* variables or site-packages, where sandboxed code could
# plant modules.
GONE = "arex-server-gone"
INIT = r'''
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
for name in ("PWD", "OLDPWD"):
    os.environ.pop(name, None)

def detach():
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

server = None
if sys.argv[1]:
    server = os.fork()
    if server == 0:
        try:
            exec(compile(sys.argv[1], "arex-server", "exec"), {"__name__": "__main__"})
        finally:
            os._exit(0)
else:
    detach()
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        time.sleep(1)
        continue
    if pid == server:
        server = None
        os.write(1, b'{"id": "%s"}\n')
        detach()
''' % GONE


def main_command(server: bool) -> list[str]:
    return ["python3", "-I", "-S", "-u", "-c", INIT, SERVER if server else ""]


class ExecServer:
    """Host side: one attached stream, requests out, replies dispatched by id."""

    def __init__(self, sock):
        self._sock = sock
        self._raw: socket.socket = getattr(sock, "_sock", sock)
        self._send_lock = threading.Lock()
        self._waiting: dict[str, queue.Queue] = {}
        self._lock = threading.Lock()
        self.alive = True
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def by_exec(cls, api, container_id: str, user: str) -> "ExecServer":
        """A server started with `docker exec` in a running container."""
        handle = api.exec_create(container_id, ["python3", "-I", "-S", "-u", "-c", SERVER], stdin=True, stdout=True, stderr=True, user=user, workdir="/")
        return cls(api.exec_start(handle["Id"], socket=True))

    @classmethod
    def attach(cls, api, container_id: str) -> "ExecServer":
        """The server that is the main process of a created (not yet started) container."""
        return cls(api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}))

    def _read(self) -> None:
        """Demultiplex docker's stream (8-byte frame headers) and dispatch JSON lines."""
        buffer = b""
        pending = b""
        try:
            while True:
                while len(pending) < 8:
                    chunk = self._raw.recv(65536)
                    if not chunk:
                        raise EOFError
                    pending += chunk
                kind, size = pending[0], struct.unpack(">I", pending[4:8])[0]
                while len(pending) < 8 + size:
                    chunk = self._raw.recv(65536)
                    if not chunk:
                        raise EOFError
                    pending += chunk
                payload, pending = pending[8 : 8 + size], pending[8 + size :]
                if kind != 1:  # stderr of the server itself: ignore
                    continue
                buffer += payload
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    msg = json.loads(line)
                    if msg.get("id") == GONE:
                        raise EOFError
                    with self._lock:
                        waiter = self._waiting.pop(msg.get("id"), None)
                    if waiter is not None:
                        waiter.put(msg)
        except (EOFError, OSError, ValueError):
            pass
        finally:
            self.alive = False
            with self._lock:
                waiting, self._waiting = self._waiting, {}
            for waiter in waiting.values():
                waiter.put(None)

    def run(self, request: dict[str, Any], wait_s: float) -> dict[str, Any]:
        if not self.alive:
            raise ServerGone("the in-sandbox exec server is not running")
        waiter: queue.Queue = queue.Queue(maxsize=1)
        with self._lock:
            self._waiting[request["id"]] = waiter
        data = (json.dumps(request) + "\n").encode()
        try:
            with self._send_lock:
                self._raw.sendall(data)
        except OSError as exc:
            raise ServerGone(f"cannot reach the exec server: {exc}") from None
        try:
            reply = waiter.get(timeout=wait_s)
        except queue.Empty:
            raise ServerGone("the exec server did not answer in time") from None
        if reply is None:
            raise ServerGone("the exec server stopped")
        if "error" in reply:
            raise ServerGone(reply["error"], ran=bool(reply.get("ran")))
        return reply

    def close(self) -> None:
        self.alive = False
        try:
            self._raw.close()
        except OSError:
            pass


def text(part: list) -> tuple[str, bool]:
    """(head, tail, total) from the server → text with the same truncation marker as the plain path."""
    from arex.sandbox.base import truncated_text

    return truncated_text(base64.b64decode(part[0]), base64.b64decode(part[1]), part[2])
