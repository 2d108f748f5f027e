"""The command server inside a sandbox (runs as root with only CAP_SETUID, CAP_SETGID, CAP_KILL).

Requests arrive as JSON lines on stdin (the container's attached stream, which only the host
holds); replies leave as JSON lines on stdout. Every command, and every file read or write on a
path the agent controls, runs through the runner (arex-run), which drops to the agent's uid: this
process never opens the agent's files itself. Being root, it is out of the agent's reach (no
signal, ptrace or /proc/<pid>/fd access across uids), so replies cannot be forged and a request
is never run twice.

Request:  {"id", "argv", "runner": [runner options], "cwd", "env", "timeout", "keep", "kill_at",
           "stdin": base64 | null, "stdin_stream": bool, "stream_out": bool}
          {"id", "feed": base64} ... {"id", "feed_end": true}   (for stdin_stream)
Replies:  {"id", "chunk": base64} ... (stream_out) then {"id", "exit_code", "signal", "cpu_s",
          "maxrss_kb", "killed", "out": [head, tail, total], "err": [...], "seconds"}
          or {"id", "error": text}
"""

import base64
import json
import os
import pwd
import queue
import signal
import subprocess
import sys
import threading
import time

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arex-run")
AGENT_UID = int(sys.argv[1])
try:  # the image's environment, as the agent's user (this process has root's HOME)
    _user = pwd.getpwuid(AGENT_UID)
    AGENT_ENV = {"HOME": _user.pw_dir, "USER": _user.pw_name, "LOGNAME": _user.pw_name}
except KeyError:
    AGENT_ENV = {"HOME": "/tmp"}
out_lock = threading.Lock()
feeds = {}
feeds_lock = threading.Lock()


def reply(msg):
    data = (json.dumps(msg) + "\n").encode()
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def sweep(uid):
    """Kill every process of `uid` from this process: no fork needed, so it works even when a
    fork bomb has taken every pid the sandbox may use."""
    for _ in range(200):
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    os.kill(int(name), signal.SIGKILL)
                    found += 1
            except OSError:
                pass
        if not found:
            return
        time.sleep(0.002)


def spawn(req, stdin):
    read_end, write_end = os.pipe()
    argv = [RUNNER, "-r", str(write_end), *req["runner"], "--", *req["argv"]]
    env = {**os.environ, **AGENT_ENV, **req["env"]}
    for attempt in range(2):
        try:
            proc = subprocess.Popen(
                argv,
                cwd="/",
                env=env,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(write_end,),
                close_fds=True,
            )
            break
        except OSError:
            if attempt:
                os.close(read_end)
                os.close(write_end)
                raise
            sweep(AGENT_UID)  # out of pids: an earlier command's fork bomb; end it, then retry once
    os.close(write_end)
    return proc, read_end


class Capture:
    """Head and tail of one stream, with the total; or every chunk sent on as it comes."""

    def __init__(self, keep, req_id, stream):
        self.half, self.rest = keep // 2, keep - keep // 2
        self.head, self.tail, self.total = bytearray(), bytearray(), 0
        self.req_id, self.stream = req_id, stream

    def add(self, chunk):
        self.total += len(chunk)
        if self.stream:
            reply({"id": self.req_id, "chunk": base64.b64encode(chunk).decode()})
            return
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.rest:
                del self.tail[: len(self.tail) - self.rest]

    def encoded(self):
        return [base64.b64encode(bytes(self.head)).decode(), base64.b64encode(bytes(self.tail)).decode(), self.total]


def feed(proc, req):
    """Write stdin: given whole, or streamed in `feed` lines."""
    try:
        if req.get("stdin_stream"):
            chunks = feeds[req["id"]]
            while True:
                chunk = chunks.get()
                if chunk is None:
                    break
                proc.stdin.write(chunk)
        else:
            proc.stdin.write(base64.b64decode(req["stdin"]))
        proc.stdin.close()
    except OSError:
        pass  # the command stopped reading: its business
    finally:
        with feeds_lock:
            feeds.pop(req["id"], None)


def run(req):
    started = time.monotonic()
    has_stdin = req.get("stdin") is not None or req.get("stdin_stream")
    proc, result_fd = spawn(req, subprocess.PIPE if has_stdin else subprocess.DEVNULL)
    out = Capture(req["keep"], req["id"], req.get("stream_out"))
    err = Capture(req["keep"], None, False)
    state = {"killed": None}
    lock = threading.Lock()

    def pump(stream, capture):
        while True:
            chunk = stream.read1(1 << 20)
            if not chunk:
                return
            with lock:
                capture.add(chunk)
                if out.total + err.total > req["kill_at"] and state["killed"] is None:
                    state["killed"] = "output_limit"
                    proc.send_signal(signal.SIGTERM)  # the runner kills the command's whole tree

    threads = [
        threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, err), daemon=True),
    ]
    if has_stdin:
        threads.append(threading.Thread(target=feed, args=(proc, req), daemon=True))
    for t in threads:
        t.start()
    with os.fdopen(result_fd, "rb") as f:
        result = f.read().decode()  # the runner writes it when the command is over
    proc.wait()
    for t in threads[:2]:
        t.join(2.0)  # background processes of the command may hold the pipes open
    fields = dict(item.split("=", 1) for item in result.split())
    if not fields:
        raise RuntimeError(f"the runner ended without a result (exit status {proc.returncode})")
    if state["killed"] is None and fields["timed_out"] == "1":
        state["killed"] = "timeout"
    with lock:
        reply(
            {
                "id": req["id"],
                "exit_code": int(fields["exit"]),
                "signal": int(fields["signal"]) or None,
                "cpu_s": int(fields["cpu_us"]) / 1e6,
                "maxrss_kb": int(fields["maxrss_kb"]),
                "killed": state["killed"],
                "out": out.encoded(),
                "err": err.encoded(),
                "seconds": round(time.monotonic() - started, 4),
                "result": fields,  # every field of the runner's line (interactive mode adds the interactor's)
            }
        )


def guarded(req):
    try:
        run(req)
    except BaseException as exc:  # e.g. no pid left for the runner: say so, never go silent
        reply({"id": req["id"], "error": f"{type(exc).__name__}: {exc}"})


def dispatch(req):
    if "feed" in req or "feed_end" in req:
        chunks = feeds.get(req["id"])
        if chunks is not None:
            chunks.put(None if req.get("feed_end") else base64.b64decode(req["feed"]))
        return
    if req.get("stdin_stream"):
        with feeds_lock:
            feeds[req["id"]] = queue.Queue()
    try:
        threading.Thread(target=guarded, args=(req,), daemon=True).start()
    except RuntimeError:  # no thread left (pids limit): free the pids, then try once more
        sweep(AGENT_UID)
        try:
            threading.Thread(target=guarded, args=(req,), daemon=True).start()
        except RuntimeError as exc:
            reply({"id": req["id"], "error": f"cannot start: {exc}"})


for line in sys.stdin.buffer:
    dispatch(json.loads(line))
