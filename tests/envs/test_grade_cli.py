"""`arex grade ENV FILE`: every test's verdict (hidden ones too), both scores, one-sentence errors."""

import json
from pathlib import Path

import pytest
from repo_paths import REPO
from typer.testing import CliRunner

from arex.cli import app
from arex.envs.build import write_env
from arex.envs.judge_sources import load

runner = CliRunner()
PAIR_SUMS = REPO / "envs" / "judge-pair-sums"
ML_ENV = REPO / "envs" / "ml-digits"


def _grade(*args: str):
    return runner.invoke(app, ["grade", *map(str, args)])


@pytest.fixture(scope="module")
def built_pair_sums(tmp_path_factory) -> Path:
    """pair-sums laid out as a built env (task.yaml listing its tests)."""
    env = tmp_path_factory.mktemp("envs") / "pair-sums"
    write_env(load(PAIR_SUMS)[0], env)
    return env


@pytest.mark.docker
def test_json_report_of_an_accepted_file_on_the_bundled_source(tmp_path):
    result = _grade(PAIR_SUMS, PAIR_SUMS / "solutions" / "accepted.cpp", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["language"] == "cpp17" and report["laid_out_from_source"] is True
    assert report["public_score"] == 1.0 and report["held_out_score"] == 1.0 and report["held_out_raw"] == 100.0
    hidden = [t for t in report["tests"] if not t["sample"]]
    assert len(hidden) == 8 and {t["verdict"] for t in report["tests"]} == {"AC"}
    assert "large-03" in {t["name"] for t in hidden}  # the user sees hidden tests by name
    assert all(t["cpu_s"] is not None and t["memory_mb"] > 0 for t in report["tests"])


@pytest.mark.docker
def test_table_shows_hidden_verdicts_and_both_scores(built_pair_sums):
    result = _grade(built_pair_sums, PAIR_SUMS / "solutions" / "off_by_one.cpp")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "on env pair-sums:" in out and "laid out" not in out  # a built env is graded as built
    rows = [line for line in result.output.splitlines() if "hidden" in line and "WA" in line]
    assert rows, result.output  # wrong on some hidden test, and that row is shown
    assert "public score:" in out and "held-out score: 0." in out


@pytest.mark.docker
def test_samples_only_with_a_named_language(built_pair_sums, tmp_path):
    source = tmp_path / "sol.txt"  # no extension arex knows: the language comes from --lang
    source.write_text((PAIR_SUMS / "solutions" / "accepted.py").read_text())
    result = _grade(built_pair_sums, source, "--lang", "python3", "--samples-only", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [t["sample"] for t in report["tests"]] == [True, True] and report["held_out_score"] is None
    assert report["public_score"] == 1.0


@pytest.mark.docker
def test_compile_error_prints_the_log(built_pair_sums, tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return missing_symbol; }\n")
    result = _grade(built_pair_sums, broken, "--samples-only")
    out = " ".join(result.output.split())
    assert result.exit_code == 0 and "compile error" in out and "missing_symbol" in out
    assert "CE" in out


def test_user_errors_are_one_sentence(tmp_path):
    source = tmp_path / "a.cpp"
    source.write_text("int main() {}\n")
    cases = [
        (_grade(tmp_path / "nope", source), "arex: Env '", "does not exist"),
        (_grade(PAIR_SUMS, tmp_path / "missing.cpp"), "arex: File '", "does not exist"),
        (_grade(PAIR_SUMS, source, "--lang", "cobol"), "arex: Unknown language 'cobol'", "Known languages:"),
        (_grade(PAIR_SUMS, tmp_path / "x.rs"), "arex: File '", "does not exist"),
        (_grade(ML_ENV, source), "arex: Env '", "judge envs"),
        (_grade(tmp_path, source), "arex: Env '", "neither a built env nor a problem source"),
    ]
    rust = tmp_path / "x.rs"
    rust.write_text("fn main() {}\n")
    cases.append((_grade(PAIR_SUMS, rust), "arex: Cannot tell the language of", "--lang"))
    for result, start, fragment in cases:
        assert result.exit_code == 2, result.output
        assert result.output.startswith(start) and fragment in " ".join(result.output.split()), result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 3
