"""The leak scan in proportion (issue 28): a dependency image is indexed once, and an env's scan then
reads only what the env added or changed plus the image's files its index says could hold this
probe's rows; it finds every leak a scan of every file finds, the library's own copy of the dataset
included. Every scan failure says why: a file too slow to read is named, a stopped scan says where."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import signal

import pandas as pd
import pytest
from repo_paths import REPO
from test_leak_forms import FORMS, small_int_table
from test_leak_scan import WRITERS, Split, lookup_table_text, make_table

from arex.envs import leak_scan
from arex.envs.leak_probe import LeakReport, describe

MODULE = '''"""A module of a library: code, docstrings, a few numbers."""

RATES = {"low": 0.25, "mid": 0.5, "high": 0.75}


def scale(values, factor=2):
    """Multiply every value by `factor` (1, 2 or 3 in practice)."""
    return [v * factor for v in values]
'''


def dependency_tree(root, frame: pd.DataFrame) -> None:
    """A stand-in for a dependency image: library code, a frequency table, a base64 string, a
    notebook, compressed test data, and the library's own copy of the env's dataset (as
    scikit-learn ships the datasets an env may be made of)."""
    files = {
        "usr/lib/python3/site-packages/lib/core.py": MODULE.encode(),
        "usr/lib/python3/site-packages/lib/freq.py": lookup_table_text(0).encode(),
        "usr/lib/python3/site-packages/lib/tests/data/blob.txt": FORMS["table.b64"](frame.head(3)),
        "usr/lib/python3/site-packages/lib/examples/tour.ipynb": FORMS["printed.ipynb"](frame.head(2)),
        "usr/lib/python3/site-packages/lib/datasets/data/table.csv.gz": WRITERS["t.csv.gz"](frame),
        "usr/share/doc/lib/README": b"A library.\n" * 50,
        "usr/bin/tool": bytes(range(256)) * 40,
    }
    for rel, blob in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)


def planned(split: Split, root, index: dict) -> dict:
    probe = json.loads(split.probe.model_dump_json())
    plan = {
        "files": {path: entry[:2] for path, entry in index["files"].items()},
        "rescan": leak_scan.plan_rescan(index, probe),
        "always": [str(root / "workspace")],
    }
    return leak_scan.scan(probe, [str(root)], plan=plan)


def found(report: dict) -> set[tuple[str, int]]:
    return {(leak["path"], leak["recovered"]) for leak in report["leaks"]}


@pytest.fixture(scope="module", params=["ints", "floats"])
def split(request) -> Split:
    return Split(small_int_table() if request.param == "ints" else make_table())


def test_an_indexed_scan_finds_what_a_full_scan_finds_reading_less(tmp_path, split):
    dependency_tree(tmp_path, split.frame)
    index = leak_scan.build_index([str(tmp_path)])
    split.arex_files(tmp_path / "workspace" / "data")
    (tmp_path / "workspace" / "cache.json").write_bytes(FORMS["labels.json"](split.frame))
    full = split.scan(tmp_path)
    scan = planned(split, tmp_path, index)
    library = str(tmp_path / "usr/lib/python3/site-packages/lib/datasets/data/table.csv.gz")
    assert (library, len(split.probe.rows)) in found(full)
    assert found(scan) == found(full) and len(found(full)) == 2, (scan["leaks"], full["leaks"])
    assert scan["unreadable"] == full["unreadable"] == []
    assert scan["files"] < full["files"] and scan["indexed"] >= 3, (scan["files"], full["files"])
    assert scan["files"] + scan["indexed"] == full["files"]


def test_a_dependency_file_changed_after_indexing_is_read_again(tmp_path, split):
    dependency_tree(tmp_path, split.frame.head(1))
    index = leak_scan.build_index([str(tmp_path)])
    assert planned(split, tmp_path, index)["leaks"] == []
    module = tmp_path / "usr/lib/python3/site-packages/lib/core.py"
    module.write_bytes(FORMS["embedded.py"](split.frame))
    os.utime(module, ns=(1, 1))  # an old date: the size still tells the change
    leaks = planned(split, tmp_path, index)["leaks"]
    assert [(leak["path"].split(":")[0], leak["recovered"]) for leak in leaks] == [(str(module), len(split.probe.rows))]


def test_the_index_is_written_and_a_plan_read_by_the_command_line(tmp_path):
    split = Split(make_table())
    dependency_tree(tmp_path / "root", split.frame)
    assert leak_scan.main(["--index", str(tmp_path / "index.json.gz"), str(tmp_path / "root")]) == 0
    with gzip.open(tmp_path / "index.json.gz", "rt") as f:
        index = json.load(f)
    assert index["version"] == leak_scan.INDEX_VERSION and len(index["files"]) == 7
    kinds = {os.path.basename(path): entry[2] for path, entry in index["files"].items()}
    assert kinds["tool"] == "skip" and kinds["table.csv.gz"] == kinds["tour.ipynb"] == kinds["blob.txt"] == "read"
    assert isinstance(kinds["core.py"], dict)
    probe = json.loads(split.probe.model_dump_json())
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    plan = {"files": {p: e[:2] for p, e in index["files"].items()}, "rescan": leak_scan.plan_rescan(index, probe)}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    args = ["--plan", str(tmp_path / "plan.json"), str(tmp_path / "probe.json"), str(tmp_path / "report.json")]
    assert leak_scan.main([*args, str(tmp_path / "root")]) == 0
    report = LeakReport.model_validate_json((tmp_path / "report.json").read_text())
    assert [os.path.basename(leak.path) for leak in report.leaks] == ["table.csv.gz"]
    assert report.indexed == 7 - report.files and report.files >= 3


# -- every failure has its reason --------------------------------------------------------------------
class KeepsRows:
    """A model that keeps the rows it was fitted on (as k-nearest-neighbours models do)."""

    def __init__(self, frame: pd.DataFrame):
        self.fit_x_ = frame.drop(columns=["label"]).to_numpy()
        self.y_ = frame["label"].to_numpy()

    def predict(self, rows):
        return [self.y_[0] for _ in rows]


class KeepsWeights(KeepsRows):
    """A model that keeps parameters only: what it was fitted on cannot be read from it."""

    def __init__(self, frame: pd.DataFrame):
        self.coef_ = frame.drop(columns=["label"]).select_dtypes("number").mean().to_numpy()


def test_a_model_fitted_on_held_out_rows(tmp_path):
    """Decided: a model that keeps its rows leaks them (found like any table); one that keeps
    none passes the gate, and the gate's detail names it (never a silent pass)."""
    split = Split(make_table())
    (tmp_path / "knn.pkl").write_bytes(pickle.dumps(KeepsRows(split.frame)))
    (tmp_path / "linear.pkl").write_bytes(pickle.dumps(KeepsWeights(split.frame)))
    report = split.scan(tmp_path)
    assert [(os.path.basename(leak["path"]), leak["recovered"]) for leak in report["leaks"]] == [
        ("knn.pkl", len(split.probe.rows))
    ]
    assert sorted(map(os.path.basename, report["models"])) == ["knn.pkl", "linear.pkl"]
    (tmp_path / "knn.pkl").unlink()
    clean = LeakReport.model_validate(split.scan(tmp_path))
    problems, scanned = describe(clean, split.probe)
    assert problems == [] and "1 pickled model(s) read" in scanned and "linear.pkl" in scanned
    assert f"({clean.cpu_seconds:.1f} CPU-seconds)" in scanned  # the build report says what the scan cost


def test_a_file_too_slow_to_read_fails_the_gate_with_its_reason(tmp_path, monkeypatch):
    split = Split(make_table())
    model = KeepsRows(split.frame)
    numbers = split.frame.select_dtypes("number").to_numpy()
    model.folds_ = {f"fold{i}": numbers * (i + 1) for i in range(400)}  # quick to unpickle, slow to search
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    monkeypatch.setattr(leak_scan, "FILE_CPU", 0.05)
    report = split.scan(tmp_path)
    assert [os.path.basename(u["path"]) for u in report["unreadable"]] == ["model.pkl"]
    reason = report["unreadable"][0]["reason"]
    assert "took over 0.05 CPU-seconds" in reason and "a model" in reason, reason
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)  # disarmed after the file


@pytest.mark.docker
def test_a_stopped_scan_says_where_it_was(monkeypatch):
    """A scan stopped by its timeout names its status, the files read and the one it was reading."""
    from arex.envs import leak_probe
    from arex.sandbox import SandboxConfig, make_sandbox

    monkeypatch.setattr(leak_probe, "SCAN_TIMEOUT", 3.0)
    split = Split(make_table())
    with make_sandbox(SandboxConfig(), "leak-stop") as box:
        with pytest.raises(leak_probe.LeakScanFailed) as failed:
            leak_probe.run_scan(box, split.probe)
    reason = str(failed.value)
    assert "did not finish (timeout" in reason and "was reading /" in reason, reason


@pytest.mark.docker
def test_the_library_copy_of_the_dataset_is_found_through_the_index(tmp_path):
    """An env image over scikit-learn, its dataset the library's digits: the scan planned by the
    dependency image's index (built once, kept in arex's cache) reads a few hundred files, not the
    image's 25,000, and still finds the library's own copy of the table."""
    import yaml

    from arex.envs import leak_probe
    from arex.envs.leak_probe import build_probe, run_scan
    from arex.envs.ml_data import split_table
    from arex.envs.ml_images import deps_image, env_image
    from arex.sandbox import SandboxConfig, make_sandbox
    from arex.specs import MLSpec

    spec = MLSpec.model_validate(
        {**yaml.safe_load((REPO / "envs" / "ml-digits" / "arex.yaml").read_text()), "scrub": []}
    )
    deps = deps_image(spec, tmp_path, SandboxConfig().image)
    with make_sandbox(SandboxConfig(image=deps), "leak-digits") as box:
        box.write_file("make_data.py", (REPO / "envs" / "ml-digits" / "make_data.py").read_bytes())
        assert box.exec("python3 make_data.py", timeout=300).ok
        text = box.read_file("data/full.csv").decode()
    columns, train, public, private = split_table(spec, text)
    probe = build_probe(spec.data, columns, train, public + private)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "README.md").write_text("Classify the digits.\n")
    image = env_image(spec, deps, tmp_path / "workspace", "leak-index-test")
    with make_sandbox(SandboxConfig(image=image, memory=2 << 30), "leak-digits") as box:
        report = run_scan(box, probe)
    assert report.index == leak_probe.dependency_image(SandboxConfig(image=image)) != ""
    assert report.indexed > 10 * report.files, (report.indexed, report.files)
    library = [leak for leak in report.leaks if leak.path.endswith("sklearn/datasets/data/digits.csv.gz")]
    assert [leak.recovered for leak in library] == [len(probe.rows)], report.leaks
