"""Host side of the in-sandbox command server (box/server.py): requests out, replies in, by id.

The server is the container's main process (under our init, box/init.py) and its stdio is the
container's attached stream, so no `docker exec` is needed per command (~50 ms of CPU each). Only
the host holds that stream; inside the sandbox the server and init run as root, out of the agent's
reach. Replies come as JSON lines; a streamed reply sends `chunk` lines before its final line.
"""

from __future__ import annotations

import base64
import json
import queue
import socket
import struct
import threading
from typing import Any, Callable

GONE = "arex-server-gone"


class ServerGone(RuntimeError):
    """The in-sandbox server stopped (or died) while a request was in flight, or cannot be reached."""


class ExecServer:
    """One attached stream; requests out, replies dispatched to their waiters by id."""

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
    def attach(cls, api, container_id: str) -> "ExecServer":
        """The server of a created (not yet started) container: attached before start, so no
        reply is missed."""
        return cls(api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}))

    def _frames(self):
        """Payloads of docker's multiplexed stream (8-byte headers); stdout only. One buffer with a
        read offset: large replies (archives) are not copied once per frame."""
        pending, start = bytearray(), 0
        while True:
            while (
                len(pending) - start < 8 or len(pending) - start < 8 + struct.unpack_from(">I", pending, start + 4)[0]
            ):
                chunk = self._raw.recv(1 << 20)
                if not chunk:
                    return
                del pending[:start]
                start = 0
                pending += chunk
            kind, size = pending[start], struct.unpack_from(">I", pending, start + 4)[0]
            payload = bytes(pending[start + 8 : start + 8 + size])
            start += 8 + size
            if kind == 1:
                yield payload

    def _read(self) -> None:
        line = bytearray()
        try:
            for payload in self._frames():
                line += payload
                if b"\n" not in payload:  # a long line (a streamed chunk) spans many frames
                    continue
                *complete, rest = bytes(line).split(b"\n")
                line = bytearray(rest)
                for text in complete:
                    self._dispatch(json.loads(text))
        except (OSError, ValueError):
            pass
        finally:
            self.alive = False
            self._fail_all()

    def _dispatch(self, msg: dict) -> None:
        if msg.get("id") == GONE:  # the server died: what was in flight is lost; a new one serves
            self._fail_all()
            return
        with self._lock:
            waiter = self._waiting.get(msg.get("id"))
            if waiter is not None and "chunk" not in msg:
                del self._waiting[msg["id"]]
        if waiter is not None:
            waiter.put(msg)

    def _fail_all(self) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.put(None)

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        try:
            with self._send_lock:
                self._raw.sendall(data)
        except OSError as exc:
            raise ServerGone(f"cannot reach the sandbox's command server: {exc}") from None

    def run(
        self,
        request: dict[str, Any],
        wait_s: float,
        on_chunk: Callable[[bytes], None] | None = None,
        feed: Callable[[], Any] | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its reply. `feed` yields stdin chunks for a streamed upload;
        `on_chunk` receives a streamed reply's chunks in order."""
        if not self.alive:
            raise ServerGone("the sandbox's command server is not running")
        waiter: queue.Queue = queue.Queue()
        with self._lock:
            self._waiting[request["id"]] = waiter
        self.send(request)
        if feed is not None:
            for chunk in feed():
                self.send({"id": request["id"], "feed": base64.b64encode(chunk).decode()})
            self.send({"id": request["id"], "feed_end": True})
        while True:
            try:
                reply = waiter.get(timeout=wait_s)
            except queue.Empty:
                with self._lock:
                    self._waiting.pop(request["id"], None)
                raise ServerGone("the sandbox's command server did not answer in time") from None
            if reply is None:
                raise ServerGone("the sandbox's command server died while this request ran (out of memory?)")
            if "chunk" not in reply:
                break
            if on_chunk is not None:
                on_chunk(base64.b64decode(reply["chunk"]))
        if "error" in reply:
            raise ServerGone(reply["error"])
        return reply

    def close(self) -> None:
        self.alive = False
        try:
            self._raw.close()
        except OSError:
            pass


def text(part: list) -> tuple[str, bool]:
    """(head, tail, total) from the server → text with a visible truncation marker."""
    from arex.sandbox.base import truncated_text

    return truncated_text(base64.b64decode(part[0]), base64.b64decode(part[1]), part[2])
