"""The CLI: clear errors for bad config, doctor's fixes, cleanup of crashed sandboxes."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from arex.cli import app

runner = CliRunner()


def test_bad_config_is_one_paragraph_not_a_traceback():
    result = runner.invoke(app, ["config", "show", "-c", "sandbox.cpus=lots"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "'sandbox.cpus'" in result.output and "expects a number" in result.output


def test_user_errors_of_the_commands_are_one_paragraph(tmp_path):
    result = runner.invoke(app, ["sandbox", "check", "--only", "no_such_check"])
    assert result.exit_code == 2 and result.output.startswith("arex: Unknown check(s): no_such_check")
    result = runner.invoke(app, ["build-envs", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.output.startswith("arex: Source(s) not found:")
    result = runner.invoke(app, ["export", "--selection", str(tmp_path), "--envs", str(tmp_path)])
    assert result.exit_code == 2 and "holds no kept.jsonl" in result.output
    assert "Traceback" not in result.output


def test_doctor_with_engine_stopped_says_how_to_start_it(tmp_path):
    # A socket path nobody listens on is exactly what a stopped engine looks like to a client.
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/docker.sock"}
    proc = subprocess.run(
        [sys.executable, "-m", "arex.cli", "doctor"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    out = " ".join(proc.stdout.split())  # rich wraps lines
    assert "No Docker engine answers" in out
    assert "dockerd --bridge=none --iptables=false" in out
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.docker
def test_doctor_reports_engine_and_image_ok():
    result = runner.invoke(app, ["doctor"])
    assert "docker engine" in result.output
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") >= 3}
    assert "ok" in lines["docker engine"] and "ok" in lines["base image"], result.output


CRASHER = textwrap.dedent(
    """
    import os, signal, sys
    from arex.sandbox import SandboxConfig, make_sandbox
    sandbox = make_sandbox(SandboxConfig(), name="crash-test")
    sandbox.start()
    print(sandbox.id, flush=True)
    mode = sys.argv[1]
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    with sandbox:
        if mode == "interrupt":
            os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("boom")
    """
)


def _container_exists(container_id: str) -> bool:
    import docker

    try:
        docker.from_env().containers.get(container_id)
        return True
    except docker.errors.NotFound:
        return False


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["interrupt", "exception"])
def test_sandbox_removed_on_ctrl_c_and_exceptions(mode):
    proc = subprocess.run([sys.executable, "-c", CRASHER, mode], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    container_id = proc.stdout.split()[0]
    assert not _container_exists(container_id)


@pytest.mark.docker
def test_prune_removes_leftovers_of_a_killed_process():
    proc = subprocess.run([sys.executable, "-c", CRASHER, "kill"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    container_id = proc.stdout.split()[0]
    assert _container_exists(container_id), "SIGKILL cannot clean up; the container must be left for prune"
    result = runner.invoke(app, ["sandbox", "prune"])
    assert result.exit_code == 0 and "arex-crash-test" in result.output
    assert not _container_exists(container_id)


@pytest.mark.docker
def test_prune_keeps_sandboxes_of_live_processes():
    from arex.sandbox import SandboxConfig, make_sandbox

    with make_sandbox(SandboxConfig(), name="live-owner") as sandbox:
        runner.invoke(app, ["sandbox", "prune"])
        assert sandbox.exec("echo still here").stdout == "still here\n"


@pytest.mark.docker
def test_sandbox_check_runs_named_checks_and_rejects_unknown_ones():
    result = runner.invoke(app, ["sandbox", "check", "--only", "exit_code_zero", "--only", "user_is_not_root"])
    assert result.exit_code == 0 and "2 passed, 0 failed" in result.output
    result = runner.invoke(app, ["sandbox", "check", "--only", "no_such_check"])
    assert result.exit_code == 2 and "Unknown check(s): no_such_check" in result.output
