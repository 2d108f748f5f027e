"""Errors: a user error is one paragraph and an exit code, a bug is a traceback, and a task spec's
problems are all named at once, with their keys and the file. No Docker needed."""

import importlib
import os
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from arex.errors import ArexError, UserInputError

# Every module that defines an ArexError subclass.
MODULES = [
    "arex.record.canary",
    "arex.config",
    "arex.envs.judge_sources",
    "arex.dataset.push",
    "arex.envs.skills",
    "arex.sandbox.base",
    "arex.record.snapshots",
    "arex.specs",
    "arex.teacher.client",
    "arex.teacher.local",
]


def _arex(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter: as `python -m arex.cli ARGS`, or `code` with argv set to ARGS."""
    command = [sys.executable, "-m", "arex.cli", *args] if code is None else [sys.executable, "-c", code, *args]
    env = {**os.environ, "COLUMNS": "300"}  # rich must not wrap what the tests read
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def test_user_error_is_one_paragraph_with_its_exit_code(tmp_path):
    proc = _arex("rollout", "--envs", str(tmp_path / "missing"))
    assert proc.returncode == UserInputError.exit_code == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.startswith("arex: --envs ") and "is not a folder" in proc.stderr
    assert "\n\n" not in proc.stderr.strip()
    assert proc.stdout == ""


def test_config_error_goes_through_the_same_handler():
    proc = _arex("config", "show", "-c", "sandbox.cpus=lots")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("arex: Config error: 'sandbox.cpus'")


def test_exit_code_is_the_error_class_own():
    proc = _arex(
        code=(
            "from arex import cli\nfrom arex.sandbox.base import SandboxError\n"
            "def cleanup(store=None, all_owners=False):\n    raise SandboxError('No Docker engine answers; start it')\n"
            "from arex.sandbox.docker import DockerSandbox\nDockerSandbox.cleanup = cleanup\ncli.main()"
        ),
        *["sandbox", "prune"],
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.strip() == "arex: No Docker engine answers; start it"


@pytest.mark.parametrize("bug", ["1 / 0", "open('/no/such/file/of/ours')", "int('x')"])
def test_a_bug_shows_its_traceback(bug):
    # A bare ZeroDivisionError / FileNotFoundError / ValueError is arex's bug, never a user error.
    code = textwrap.dedent(
        f"""
        import arex.config
        from arex import cli
        def load_config(items):
            return {bug}
        arex.config.load_config = load_config
        cli.main()
        """
    )
    proc = _arex("config", "show", code=code)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "arex: " not in proc.stderr


def test_keyboard_interrupt_is_one_line_and_130(monkeypatch):
    import arex.config
    from arex.cli import app

    def interrupted(items):
        raise KeyboardInterrupt

    monkeypatch.setattr(arex.config, "load_config", interrupted)
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 130
    assert result.output.strip() == "arex: interrupted"


def test_arex_error_under_clirunner_exits_with_its_code(monkeypatch):
    import arex.config
    from arex.cli import app
    from arex.record.canary import LeakError

    def leak(items):
        raise LeakError("store/x.jsonl:3: the private-data canary of env 'e' appears in this trajectory.")

    monkeypatch.setattr(arex.config, "load_config", leak)
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert result.output.startswith("arex: store/x.jsonl:3:")


TASK_WITH_THREE_PROBLEMS = """\
id: pair-sums
title: Pair sums
time_limt_s: 2
memory_mb: lots
tests:
  - {name: t1, input: tests/1.in}
"""


def test_task_spec_reports_every_problem_with_key_and_file(tmp_path):
    from arex.specs import SpecError, load_task_spec

    path = tmp_path / "task.yaml"
    path.write_text(TASK_WITH_THREE_PROBLEMS)
    with pytest.raises(SpecError) as info:
        load_task_spec(path)
    message = str(info.value)
    assert str(path) in message
    assert "unknown key 'time_limt_s'" in message and "Did you mean 'time_limit_s'?" in message
    assert "missing key 'time_limit_s'" in message
    assert "'memory_mb' expects an integer, got 'lots'" in message
    assert "missing key 'tests.0.answer': expects a string" in message
    assert message.count("Also:") == 3
    assert isinstance(info.value, ValueError) and info.value.exit_code == 2


def test_ml_spec_nested_keys_and_kind(tmp_path):
    from arex.specs import MLSpec, SpecError, load_task_spec

    path = tmp_path / "arex.yaml"
    path.write_text(
        "id: x\ntitle: t\nrun: python3 t.py\nmetric: {name: rmse, direction: down}\n"
        "data: {table: d.csv, target: y, split: {sed: 1}}\n"
    )
    with pytest.raises(SpecError) as info:
        load_task_spec(path, MLSpec)
    message = str(info.value)
    assert "'metric.direction' expects one of 'maximize', 'minimize', got 'down'" in message
    assert "unknown key 'data.split.sed'" in message and "Did you mean 'data.split.seed'?" in message
    path.write_text("kind: quantum\nid: x\n")
    with pytest.raises(SpecError, match="unknown kind 'quantum'; known kinds: judge, ml"):
        load_task_spec(path)
    path.write_text("- a\n")
    with pytest.raises(SpecError, match="must be a mapping"):
        load_task_spec(path)
    path.write_text("id: [1\n")
    with pytest.raises(SpecError, match=r"not valid YAML at line \d+"):
        load_task_spec(path)


def test_builders_get_their_own_error_class_back(tmp_path):
    from pydantic import ValidationError

    from arex.envs.judge_sources import SourceError
    from arex.specs import JudgeSpec, SpecError, validate_spec

    with pytest.raises(SourceError) as info:
        validate_spec(
            JudgeSpec,
            {"id": "x", "title": "t", "tests": [], "time_limit_s": "soon"},
            tmp_path / "task.yaml",
            SourceError,
        )
    assert "'time_limit_s' expects a number" in str(info.value) and isinstance(info.value, SpecError)
    try:
        JudgeSpec(id="x", title="t", tests=[])
    except ValidationError as exc:
        error = SourceError.from_validation("p/task.yaml", exc, JudgeSpec)
    assert type(error) is SourceError and "missing key 'time_limit_s'" in str(error)


def test_every_arex_error_has_a_docstring_and_an_exit_code():
    for module in MODULES:
        importlib.import_module(module)
    classes = [ArexError, *_subclasses(ArexError)]
    names = {c.__name__ for c in classes}
    assert {
        "ConfigError",
        "SpecError",
        "SourceError",
        "SandboxError",
        "TeacherError",
        "LeakError",
        "PushError",
        "SkillError",
    } <= names
    for cls in classes:
        assert (cls.__dict__.get("__doc__") or "").strip(), f"{cls.__name__} has no docstring"
        assert isinstance(cls.exit_code, int) and 0 < cls.exit_code < 256, cls
    # Errors the user cannot cause stay out of the handler's reach.
    from arex.grading.ml import SubmissionError
    from arex.record.snapshots import MemberError
    from arex.sandbox.base import ArchiveTooLarge

    assert not any(issubclass(c, ArexError) for c in (SubmissionError, ArchiveTooLarge, MemberError))


def test_value_errors_stay_value_errors():
    # Code that catches ValueError / RuntimeError keeps working.
    from arex.config import ConfigError
    from arex.envs.judge_sources import SourceError
    from arex.envs.skills import SkillError
    from arex.sandbox.base import SandboxError
    from arex.teacher.client import TeacherError

    assert all(issubclass(c, ValueError) for c in (ConfigError, SourceError, SkillError))
    assert all(issubclass(c, RuntimeError) for c in (SandboxError, TeacherError))


def test_help_loads_no_stage_and_no_docker_sdk():
    code = "import sys, arex.cli; print(sorted(m for m in sys.modules if m.startswith(('arex', 'docker', 'pydantic'))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "['arex', 'arex.cli', 'arex.errors']"
    code = "import sys, arex.config; print('docker' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
        == "False"
    )
    assert _arex("--help").returncode == 0


def test_unknown_sandbox_backend_is_a_config_error():
    from arex.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="unknown sandbox backend 'podman'; known backends: docker"):
        load_config(["sandbox.backend=podman"])
