"""`make bench`'s runner (bench/run_all.py): figures read from each bench's last line, targets,
failed benches as rows, the subset option. Fake benches run as real processes; no Docker."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

BENCH = REPO / "bench"


def _runner():
    spec = importlib.util.spec_from_file_location("run_all", BENCH / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_all"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


run_all = _runner()


def test_every_bench_has_figures_its_last_line_prints():
    """Each bench is in FIGURES, and its source prints every key its entry and target name."""
    names = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_") and p.name != "run_all.py")
    assert "agent_overhead" in names and "judge_overhead" in names
    for name in names:
        spec = run_all.FIGURES[name]
        source = (BENCH / f"{name}.py").read_text()
        keys = (
            {spec.arex, spec.baseline, spec.ratio}
            | set(re.findall(r"(\w+)\s*(?:<=|>=|<|>)", spec.target))
            | set(re.findall(r"\*\s*(\w+)", spec.target))
        )
        computed = set() if spec.ratio else {"ratio"}  # no ratio key: the runner divides arex by baseline
        for key in keys - {""} - computed:
            assert f"{key}=" in source, f"bench/{name}.py prints no {key}="


def test_figures_ratio_and_targets():
    row = run_all.figures("judge_overhead", "arex_s=3.00 native_s=2.50 ratio=1.20 per_test_ms=7.5", 1.0)
    assert (row.status, row.arex, row.baseline, row.ratio, row.met) == ("ok", 3.0, 2.5, 1.2, True)
    assert run_all.figures("judge_overhead", "arex_s=4 native_s=2 ratio=2.0 per_test_ms=1", 1.0).met is False
    # No ratio key: the runner divides; a target may compare two keys.
    row = run_all.figures(
        "export",
        "rows_per_s=9 mb_per_s=1 peak_mb=100 peak_mb_at_2x=110 baseline_peak_mb=400 baseline_rows_per_s=5",
        1.0,
    )
    assert row.ratio == 0.25 and row.met is True
    assert run_all.figures("export", "peak_mb=100 peak_mb_at_2x=200 baseline_peak_mb=400", 1.0).met is False
    assert run_all.figures("judge_overhead", "arex_s=3 native_s=2", 1.0).met is False  # the target's key is missing
    assert run_all.figures("judge_overhead", "all done", 1.0).status == "failed"
    assert run_all.figures("mystery", "x=1", 1.0).status == "no figures"


def _fake_benches(tmp_path: Path) -> Path:
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(BENCH / "run_all.py", bench / "run_all.py")
    (bench / "judge_overhead.py").write_text(
        "print('a table')\nprint('arex_s=1.0 native_s=1.0 ratio=1.00 per_test_ms=2')\n"
    )
    (bench / "env_rebuild.py").write_text("import sys\nprint('first_s=1')\nsys.exit('the engine went away')\n")
    (bench / "_helper.py").write_text("raise SystemExit('a helper is never run')\n")
    return bench


def test_runner_rows_for_ok_and_failed_benches(tmp_path):
    bench = _fake_benches(tmp_path)
    done = subprocess.run(
        [sys.executable, str(bench / "run_all.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "B_ONLY": ""},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((bench / "results" / "results.json").read_text())
    rows = {row["bench"]: row for row in result["benches"]}
    assert set(rows) == {"judge_overhead", "env_rebuild"}
    assert rows["judge_overhead"]["status"] == "ok" and rows["judge_overhead"]["met"] is True
    assert rows["env_rebuild"]["status"] == "failed" and "the engine went away" in rows["env_rebuild"]["error"]
    table = (bench / "results" / "results.md").read_text()
    assert "| judge_overhead | 1 (arex_s) | 1 (native_s) | 1 | ratio <= 1.5 | met |" in table
    assert table in done.stdout


@pytest.mark.parametrize(("only", "code", "names"), [("judge_overhead", 0, {"judge_overhead"}), ("nope", 1, None)])
def test_runner_subset(tmp_path, only, code, names):
    bench = _fake_benches(tmp_path)
    done = subprocess.run(
        [sys.executable, str(bench / "run_all.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "B_ONLY": only},
    )
    assert done.returncode == code, done.stdout + done.stderr
    if names is None:
        assert "B_ONLY names no bench nope" in done.stderr and "Traceback" not in done.stderr
    else:
        assert {
            row["bench"] for row in json.loads((bench / "results" / "results.json").read_text())["benches"]
        } == names
