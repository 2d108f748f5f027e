"""Bad input to `arex rollout`, `select` and `build-envs` ends in one paragraph naming the file, key
or option, with a non-zero exit code, before anything is written or any teacher call is made:
configs that are not UTF-8 or hold values YAML cannot build, counts below 1, task specs that are
not YAML or have a value of the wrong type, a broken prompts file. No Docker (the `tally` env kind
and the process sandbox of tests/loop_kit.py)."""

from pathlib import Path

import pytest
from loop_kit import cli_rollout, select_cli, write_tally_env
from typer.testing import CliRunner

from arex.cli import app
from arex.config import ConfigError, load_config
from arex.teacher.scripted import RoundScript, ScriptedServer

runner = CliRunner()

pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


@pytest.fixture
def env(tally_env):
    return tally_env


def one_paragraph(result, code: int = 2) -> str:
    """The output of a command that failed on bad input: `arex: <one paragraph>`, exit `code`."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit), (
        result.output
    )
    text = result.output.strip()
    assert text.startswith("arex: ") and "\n" not in text, text
    return text


@pytest.fixture
def server():
    with ScriptedServer(RoundScript(lambda n: ["echo 2 > answer.txt"]), model="scripted-teacher") as server:
        yield server


# -- config files ----------------------------------------------------------------------------------
def test_a_config_that_is_not_utf8_names_the_file_and_line(env, tmp_path, server):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("rollout:\n  rounds: 2\n  prompts: caf\xe9.yaml\n".encode("latin-1"))
    text = one_paragraph(cli_rollout(env, tmp_path / "store", server.base_url, "-c", str(bad)))
    assert f"'{bad}' is not UTF-8 text (byte 0xe9 on line 3)" in text
    assert server.requests == [] and not (tmp_path / "store").exists()


def test_a_value_yaml_cannot_build_is_a_config_error_not_a_traceback(tmp_path):
    dated = tmp_path / "dated.yaml"
    dated.write_text("rollout:\n  rounds: 2024-13-45\n")
    with pytest.raises(ConfigError, match=f"'{dated}' holds a value YAML cannot read"):
        load_config([str(dated)])
    with pytest.raises(
        ConfigError, match=r"'rollout.rounds' \(set by -c rollout.rounds=2024-13-45\) expects an integer"
    ):
        load_config(["rollout.rounds=2024-13-45"])
    looped = tmp_path / "looped.yaml"
    looped.write_text("rollout: &x\n  skills_dir: *x\n")
    with pytest.raises(ConfigError, match=f"a value in {looped} contains itself"):
        load_config([str(looped)])
    with pytest.raises(ConfigError, match=r"a value in -c rollout=&x \[\*x\] contains itself"):
        load_config(["rollout=&x [*x]"])


# -- counts ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--rounds", "-1"], "'rollout.rounds' (set by --rounds) cannot be -1: it must be greater than or equal to 1"),
        (["--rounds", "0"], "'rollout.rounds' (set by --rounds)"),
        (["--samples", "0"], "--samples expects an integer of at least 1, got 0"),
        (["--samples", "-3"], "--samples expects an integer of at least 1, got -3"),
        (["--concurrency", "0"], "--concurrency expects an integer of at least 1, got 0"),
        (["--concurrency", "-1"], "--concurrency expects an integer of at least 1, got -1"),
        (["-c", "rollout.rounds=-1"], "'rollout.rounds' (set by -c rollout.rounds=-1)"),
        (["-c", "rollout.steps_per_round=0"], "'rollout.steps_per_round' (set by -c rollout.steps_per_round=0)"),
        (["-c", "rollout.format_error_streak=0"], "'rollout.format_error_streak'"),
        (["-c", "rollout.command_timeout_s=0"], "'rollout.command_timeout_s'"),
        (["-c", "rollout.observation_chars=-5"], "'rollout.observation_chars'"),
        (["-c", "rollout.max_tokens=0"], "'rollout.max_tokens'"),
        (["-c", "rollout.max_cost_usd=-1"], "'rollout.max_cost_usd'"),
        (["-c", "rollout.max_wall_s=0"], "'rollout.max_wall_s'"),
    ],
)
def test_counts_below_one_are_refused_before_any_work(env, tmp_path, server, args, expected):
    text = one_paragraph(cli_rollout(env, tmp_path / "store", server.base_url, *args))
    assert expected in text
    # today --rounds -1 made a `done` record with 0 rounds
    assert server.requests == [] and not (tmp_path / "store").exists()


def test_counts_in_a_config_file_name_the_file(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("rollout:\n  rounds: -1\n")
    with pytest.raises(ConfigError, match=f"'rollout.rounds' \\(set by {config}\\).*greater than or equal to 1"):
        load_config([str(config)])


def test_select_and_build_envs_refuse_a_concurrency_below_one(env, tmp_path):
    result = runner.invoke(
        app,
        [
            "select",
            "--store",
            str(tmp_path),
            "--envs",
            str(env.dir.parent),
            "--out",
            str(tmp_path / "sel"),
            "--concurrency",
            "0",
        ],
    )
    assert "--concurrency expects an integer of at least 1, got 0" in one_paragraph(result)
    result = runner.invoke(app, ["build-envs", str(env.dir), "--out", str(tmp_path / "built"), "--concurrency", "-2"])
    assert "--concurrency expects an integer of at least 1, got -2" in one_paragraph(result)
    assert not (tmp_path / "sel").exists() and not (tmp_path / "built").exists()


# -- task specs and prompts -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "task, expected",
    [
        ("kind: tally\nid: broken\ntitle: [unclosed\n", "is not valid YAML at line"),
        ("kind: tally\nid: broken\ntitle: [1, 2]\n", "'title' expects a string"),
        ("- kind\n- tally\n", "must be a mapping of keys"),
    ],
)
def test_one_broken_task_spec_among_several_stops_rollout_and_select_naming_it(env, tmp_path, server, task, expected):
    broken = write_tally_env(env.dir.parent, "broken") / "task.yaml"
    broken.write_text(task)
    text = one_paragraph(cli_rollout(env, tmp_path / "store", server.base_url, "--rounds", "1"))
    assert str(broken) in text and expected in text
    assert server.requests == [] and not (tmp_path / "store").exists()
    (tmp_path / "store" / "tally").mkdir(parents=True)
    text = one_paragraph(select_cli(tmp_path / "store", env.dir.parent, tmp_path / "selected"))
    assert str(broken) in text and expected in text


@pytest.mark.parametrize(
    "content, expected",
    [
        ("system: caf\xe9\n".encode("latin-1"), "cannot be read"),
        (b"system: [unclosed\n", "is not valid YAML at line 2"),
        (b"- system\n- round\n", "must be a mapping of prompt names to texts"),
        (b"system: 1\n", "lacks: best, feedback"),
    ],
)
def test_a_broken_prompts_file_is_named(env, tmp_path, server, content, expected):
    prompts = tmp_path / "prompts.yaml"
    prompts.write_bytes(content)
    text = one_paragraph(cli_rollout(env, tmp_path / "store", server.base_url, "-c", f"rollout.prompts={prompts}"))
    assert str(prompts) in text and expected in text
    assert server.requests == []


def test_a_prompt_that_is_not_text_is_named(tmp_path):
    from arex.errors import UserInputError
    from arex.rollout.config import PROMPTS, RolloutConfig

    prompts = tmp_path / "prompts.yaml"
    prompts.write_text(
        "".join(f"{name}: text\n" for name in sorted(PROMPTS)).replace("reflect: text", "reflect: [a, b]")
    )
    with pytest.raises(UserInputError, match="reflect must be text, not list"):
        RolloutConfig(prompts=str(Path(prompts))).load_prompts()


def test_selection_and_sandbox_counts_are_range_checked_too():
    from arex.config import ConfigError, load_config

    with pytest.raises(ConfigError) as caught:
        load_config(
            ["select.max_repeat_streak=0", "sandbox.cpus=0", "sandbox.pids_limit=-5", "select.llm_judge.min_score=11"]
        )
    message = str(caught.value)
    for key in ("select.max_repeat_streak", "sandbox.cpus", "sandbox.pids_limit", "select.llm_judge.min_score"):
        assert f"'{key}'" in message, (key, message)


def test_a_config_path_too_long_for_the_os_is_one_sentence(tmp_path):
    """`OSError: File name too long` escaped as a traceback (issue 31)."""
    for item in ("a" * 300, "a" * 300 + ".yaml", "x=" + "a" * 5000, "a/" * 3000):
        text = one_paragraph(runner.invoke(app, ["config", "show", "-c", item]))
        assert "not found" in text or "unknown key" in text, text
