"""Every package of tests/corpus (written for this project, one per real-archive shape) builds, or is
rejected with its documented reason.

Each package folder holds `expect.yaml`:
    status: accepted | rejected        # what `arex build-envs` must report
    reason: "words the reason holds"   # rejected only: a fragment of the one-sentence reason
    env_id: some-id                    # accepted only (optional): the id the env gets
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
    else:
        assert any(r.status == "rejected" and expect["reason"].lower() in r.reason.lower() for r in reports), statuses
    # The report names each source and keeps each reason on one table row.
    table = (out / "build-report.md").read_text()
    assert all(len([line for line in table.splitlines() if f"| {r.source} |" in line]) == 1 for r in reports), table


def test_corpus_is_not_empty() -> None:
    assert len(PACKAGES) >= 10
