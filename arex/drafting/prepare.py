"""Finding and running a repository's data-preparation script, the way the build will: in a
sandbox of the dependency image, without network. What it wrote is the candidate table."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel

from arex.drafting.inspect import TABLE_SUFFIXES, RepoFacts, ScriptInfo
from arex.envs.ml_source import TABLE_CAP, tail
from arex.sandbox import SandboxConfig, make_sandbox
from arex.specs import MLSpec

_PREPARE_NAME = re.compile(
    r"(make|prepare|prep|download|build|create|generate|get|fetch)_?(data|dataset|table)|^prepare|^preprocess|^download",
    re.I,
)

PACKAGED_DATA = {
    "load_digits": ["sklearn/datasets/data/digits.csv.gz"],
    "load_breast_cancer": ["sklearn/datasets/data/breast_cancer.csv"],
    "load_diabetes": ["sklearn/datasets/data/diabetes_data_raw.csv.gz", "sklearn/datasets/data/diabetes_target.csv.gz"],
    "load_iris": ["sklearn/datasets/data/iris.csv"],
    "load_wine": ["sklearn/datasets/data/wine_data.csv"],
    "load_linnerud": [
        "sklearn/datasets/data/linnerud_exercise.csv",
        "sklearn/datasets/data/linnerud_physiological.csv",
    ],
}
"""scikit-learn loaders whose data ships inside the package: the agent could load the full
labelled table, so the draft scrubs these files from the image and probes that loading fails."""


class Prepared(BaseModel):
    script: str
    command: str
    table: str | None = None
    """The tabular file the script wrote (the largest, if several)."""
    blob: bytes = b""
    error: str = ""


def prepare_candidates(facts: RepoFacts, run_script: str | None) -> list[ScriptInfo]:
    """Scripts that look like data preparation: named so, or writing a data file (not the run
    script, not one writing only a submission), best first."""
    named = [s for s in facts.scripts if _PREPARE_NAME.search(Path(s.path).stem) and s.path != run_script]
    writers = [
        s
        for s in facts.scripts
        if s not in named and s.path != run_script and any(w.lower().endswith(TABLE_SUFFIXES) for w in s.written)
    ]
    return named + writers


_LIST_NEW = (
    "import json, os, sys\n"
    "found = []\n"
    "for d, dirs, files in os.walk('.'):\n"
    "    for f in files:\n"
    "        p = os.path.join(d, f)[2:]\n"
    "        if p.lower().endswith(tuple(sys.argv[1].split(','))) and os.path.getmtime(p) >= float(sys.argv[2]):\n"
    "            found.append([p, os.path.getsize(p)])\n"
    "print(json.dumps(found))\n"
)


def run_prepare(repo: Path, script: str, deps: str, sandbox: SandboxConfig, time_limit: float = 600) -> Prepared:
    """Run `python3 <script>` in a fresh sandbox of `deps` (no network) and read the largest
    table it wrote."""
    command = f"python3 {script}"
    config = sandbox.model_copy(
        update={
            "image": deps,
            "memory": max(sandbox.memory, 2 << 30),
            "mounts": (),
            "network": False,
            "disk": max(sandbox.disk, 1 << 30),
        }
    )
    with make_sandbox(config, "draft-prepare") as box:
        box.copy_in(repo, ".")
        started = box.exec("python3 -c 'import time; print(time.time())'", timeout=30).stdout.strip() or "0"
        result = box.exec(command, timeout=time_limit)
        if not result.ok:
            return Prepared(
                script=script,
                command=command,
                error=f"{result.status}, exit {result.exit_code}: {tail(result.stderr or result.stdout, 400)}",
            )
        box.write_file("/tmp/arex-list.py", _LIST_NEW)
        listing = box.exec(
            ["python3", "/tmp/arex-list.py", ",".join(TABLE_SUFFIXES), str(float(started) - 1)], timeout=60
        )
        written = json.loads(listing.stdout or "[]") if listing.ok else []
        if not written:
            return Prepared(script=script, command=command, error="it wrote no table (csv, tsv, json, parquet, xlsx)")
        table = max(written, key=lambda item: item[1])[0]
        return Prepared(script=script, command=command, table=table, blob=box.read_file(table, max_bytes=TABLE_CAP))


def existing_scrub(entries: list[str], deps: str, sandbox: SandboxConfig) -> list[str]:
    """The scrub entries present in the dependency image (a scrub of a missing file fails the build)."""
    if not entries:
        return []
    probe = (
        "import importlib.util, os, sys\n"
        "for e in sys.argv[1:]:\n"
        "    p, _, r = e.partition('/')\n"
        "    s = importlib.util.find_spec(p)\n"
        "    if s and s.submodule_search_locations and "
        "os.path.exists(os.path.join(list(s.submodule_search_locations)[0], r)): print(e)\n"
    )
    config = sandbox.model_copy(update={"image": deps, "mounts": (), "network": False})
    with make_sandbox(config, "draft-scrub") as box:
        box.write_file("/tmp/arex-scrub-probe.py", probe)
        out = box.exec(["python3", "/tmp/arex-scrub-probe.py", *entries], timeout=60)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def deps_spec(requirements: list[str], requirements_file: str | None) -> MLSpec:
    """A placeholder spec carrying only what the dependency image is made from."""
    return MLSpec(
        id="draft",
        title="draft",
        run="true",
        requirements=tuple(requirements),
        requirements_file=requirements_file,
        metric={"name": "accuracy", "direction": "maximize"},
        data={"table": "x.csv", "target": "y"},
    )
