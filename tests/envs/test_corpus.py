"""Every package of tests/corpus (written for this project, one per real-archive shape) builds, or is
rejected with its documented reason.

Each package folder holds `expect.yaml`:
    status: accepted | rejected        # what `arex build-envs` must report
    reason: "words the reason holds"   # rejected only: a fragment of the one-sentence reason
    env_id: some-id                    # accepted only (optional): the id the env gets
    time_limit_s: 3                    # accepted only (optional): the env's time limit
    gates: {gate name: "words its detail holds"}   # (optional) gates that passed, as the report says
The corpus is the list the README's Environments section gives: add a shape there and here.
"""

from pathlib import Path

import pytest
import yaml
from repo_paths import TESTS

from arex.envs.build import build_envs

CORPUS = TESTS / "corpus"
PACKAGES = sorted(p for p in CORPUS.iterdir() if (p / "expect.yaml").is_file()) if CORPUS.is_dir() else []


def _source(package: Path) -> Path:
    """The source inside a package folder: a lone .json/.jsonl file, else the folder itself."""
    rows = [p for p in package.iterdir() if p.suffix in (".json", ".jsonl")]
    return rows[0] if len(rows) == 1 and not (package / "problem.yaml").exists() else package


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[Path, list]]:
    """Every package built in one `build_envs` call, two at a time, as a user would run them."""
    out = tmp_path_factory.mktemp("corpus") / "envs"
    sources = {_source(p): p for p in PACKAGES}
    reports = build_envs(list(sources), out, concurrency=2)
    by_package: dict[Path, list] = {p: [] for p in PACKAGES}
    for report in reports:
        by_package[sources[Path(report.source)]].append(report)
    return out, by_package


@pytest.mark.docker
@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_corpus_package(package: Path, built) -> None:
    expect = yaml.safe_load((package / "expect.yaml").read_text())
    out, by_package = built
    reports = by_package[package]
    statuses = [(r.status, r.reason) for r in reports]
    assert reports, f"{package.name}: no report at all"
    if expect["status"] == "accepted":
        assert all(r.status == "accepted" for r in reports), statuses
        if expect.get("env_id"):
            assert [r.env_id for r in reports] == [expect["env_id"]]
        if expect.get("time_limit_s"):
            task = yaml.safe_load((out / reports[0].env_id / "task.yaml").read_text())
            assert task["time_limit_s"] == expect["time_limit_s"], task["time_limit_s"]
    else:
        assert any(r.status == "rejected" and expect["reason"].lower() in r.reason.lower() for r in reports), statuses
    for name, words in (expect.get("gates") or {}).items():
        details = [g.detail for r in reports for g in r.gates if g.name == name and g.passed]
        assert any(words in detail for detail in details), (
            name,
            [(g.name, g.detail) for r in reports for g in r.gates],
        )
    # The report names each source and keeps each reason on one table row.
    table = (out / "build-report.md").read_text()
    assert all(len([line for line in table.splitlines() if f"| {r.source} |" in line]) == 1 for r in reports), table


@pytest.mark.docker
def test_generated_tests_are_cached_by_content(built, monkeypatch) -> None:
    """A rebuild of an unchanged package reads the tests its generators made from the cache: no
    sandbox is started (the corpus build above made them)."""
    from arex.envs import judge_generate
    from arex.envs.judge_sources import source_files
    from arex.sandbox import SandboxConfig

    def started(*args, **kw):
        raise AssertionError("a sandbox was started for tests already generated")

    monkeypatch.setattr(judge_generate, "make_sandbox", started)
    package = CORPUS / "kattis-generators"
    generated = judge_generate.generated_data(package, source_files(package), SandboxConfig())
    assert generated is not None and generated.summary.startswith("18 tests from generators/generators.yaml")
    assert sorted(p.name for p in (generated.data / "secret" / "1-large" / "1-huge").iterdir())[:2] == [
        "09-a.ans",
        "09-a.in",
    ]
    # The generator that wrote both files kept its own answer (the solution would print the same
    # sum, so the input shows which: 2 × 10^9, written by writer.py, not by the solution).
    assert (generated.data / "secret" / "06-self.ans").read_text() == "2000000000\n"


def test_corpus_is_not_empty() -> None:
    assert len(PACKAGES) >= 10
