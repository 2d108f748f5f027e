"""`arex draft-env`, the build and revise side: the draft's own packages never pin a second version
of one the repository pins; a training run's draft leaves out web-app and other-OS requirements;
every kind of requirements rejection is revised (relax, unpin, leave out); a clean git folder is
pinned to its commit and a dirty one recorded as built; a table over the read cap is sampled and
said so; a baseline at the metric's best is rejected; reasons are never cut mid-word; an
unreachable repository keeps git's cause; and, with real Docker, a repository pinning pandas and
scikit-learn (and Flask, gunicorn, pywin32) drafts and builds in one attempt, each stage printed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import git
import pytest
import yaml
from typer.testing import CliRunner

from arex.cli import app
from arex.drafting import Attempt, DraftError
from arex.drafting.base import Draft, clip
from arex.drafting.heuristic import HeuristicDrafter
from arex.drafting.run import DraftResult, checkout, write_draft_report, write_overlay
from arex.envs.judge_sources import SourceError
from arex.envs.ml_images import Preflight, Unresolvable, unresolvable_sentence
from arex.envs.ml_source import MLSource, fetch

REQUIREMENTS = "pandas==2.2.3\nscikit-learn==1.6.1\nFlask==0.12.2\ngunicorn==19.9.0\npywin32==306\n-e .\n"


def write_repo(root: Path, files: dict[str, str | bytes], commit: bool = True) -> Path:
    root.mkdir(parents=True)
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content if isinstance(content, bytes) else content.encode())
    if commit:
        repo = git.Repo.init(root)
        repo.git.add("-A")
        repo.git.commit(
            "-m",
            "init",
            author="t <t@example.com>",
            env={"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"},
        )
    return root


def patients(rows: int, seed: int = 0) -> str:
    """A noisy binary table: a model learns it well, never perfectly."""
    rng = random.Random(seed)
    lines = ["age,pressure,smoker,outcome"]
    for _ in range(rows):
        age, pressure, smoker = rng.randint(20, 80), round(rng.uniform(90, 180), 1), rng.choice(["yes", "no"])
        risk = age / 80 + pressure / 180 + (0.3 if smoker == "yes" else 0) + rng.gauss(0, 0.35)
        lines.append(f"{age},{pressure},{smoker},{int(risk > 1.7)}")
    return "\n".join(lines) + "\n"


def preflight_reason(failure: Unresolvable | None = None, error: str = "", relax: bool = False) -> str:
    """A requirements rejection as the build words it (the real sentence of arex.envs.ml_images)."""
    result = Preflight(python="3.11.2", failure=failure, error=error)
    return unresolvable_sentence(result, "arex-base:latest", "the spec's requirements and requirements.txt", relax, [])


# -- the draft's own packages and the repository's pins ----------------------------------------------
def test_the_wrapper_runs_on_the_repository_pins_and_web_requirements_are_left_out(tmp_path):
    """Before: the draft added pandas and scikit-learn beside requirements.txt's own pins (a second
    version of each: the preflight failed by construction) and kept Flask, gunicorn, pywin32, `-e .`."""
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(80), "requirements.txt": REQUIREMENTS})
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    spec = draft.spec
    assert spec["run"] == "python3 arex_train.py" and spec["requirements"] == []
    assert spec["requirements_file"] == "arex_requirements.txt"
    lines = [ln for ln in draft.add["arex_requirements.txt"].splitlines() if not ln.startswith("#")]
    assert lines == ["pandas==2.2.3", "scikit-learn==1.6.1"]
    why = {g.field: g.why for g in draft.guesses}["requirements_file"]
    for left_out in ("flask==0.12.2", "gunicorn==19.9.0", "pywin32==306", "-e ."):
        assert left_out in why, why


def test_a_package_the_repository_does_not_pin_is_pinned_beside_its_pins(monkeypatch, tmp_path):
    """The wrapper's scikit-learn is resolved together with the repository's pandas pin, and a web
    framework the run script itself imports stays."""
    from arex.envs import ml_images

    asked = []

    def resolve(requirements, image):
        asked.append(list(requirements))
        return {r: "1.2.2" for r in requirements}

    monkeypatch.setattr(ml_images, "resolve_pins", resolve)
    checked = []
    monkeypatch.setattr(ml_images, "settle", lambda lines, *a, **k: checked.append(lines) or ml_images.Settled(lines))
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(80), "requirements.txt": "pandas==1.5.3\n"})
    drafter, said = HeuristicDrafter(), []
    drafter.progress = said.append  # what `arex draft-env` prints as each slow step starts
    draft = drafter.draft(repo, [])
    assert [line.split(" (")[0] for line in said] == [
        "reading the repository",
        "resolving versions of scikit-learn",
        "requirements preflight of the draft",
    ]
    assert asked == [["scikit-learn", "pandas==1.5.3"]]
    assert checked == [["pandas==1.5.3", "scikit-learn==1.2.2"]]  # the build's preflight, before the build
    assert (
        draft.spec["requirements"] == ["scikit-learn==1.2.2"] and draft.spec["requirements_file"] == "requirements.txt"
    )


APP_PY = """
from flask import Flask
from peewee import Model, SqliteDatabase
from playhouse.shortcuts import model_to_dict
app = Flask(__name__)
"""
TRAIN_MODEL_PY = """
import joblib
import pandas as pd
from sklearn.linear_model import LogisticRegression
df = pd.read_csv("patients.csv")
joblib.dump(LogisticRegression().fit(df[["age", "pressure"]], df["outcome"]), "model.joblib")
"""


def test_a_deployment_repository_gets_the_training_runs_requirements_only(tmp_path):
    """Found on a model-deployment repository (E's trial): the draft required the web app's Flask,
    peewee and playhouse (peewee's own module) from every script's imports, and did not see its
    requirements_dev.txt / requirements_prod.txt."""
    files = {"patients.csv": patients(80), "app.py": APP_PY, "train_model.py": TRAIN_MODEL_PY}
    repo = write_repo(tmp_path / "deploy", files)
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    assert draft.spec["requirements"] == ["pandas", "scikit-learn"] and "requirements_file" not in draft.spec
    files |= {"requirements_dev.txt": "pandas==2.2.3\nscikit-learn==1.6.1\njupyter\n"}
    files |= {"requirements_prod.txt": "flask\n"}
    with_files = write_repo(tmp_path / "deploy2", files)
    draft = HeuristicDrafter(pin=False).draft(with_files, [])
    assert draft.spec["requirements_file"] == "arex_requirements.txt" and draft.spec["requirements"] == []
    assert draft.add["arex_requirements.txt"].startswith("# requirements_dev.txt as")
    assert draft.add["arex_requirements.txt"].splitlines()[1:] == ["pandas==2.2.3", "scikit-learn==1.6.1"]


def test_a_preparation_script_runs_on_the_filtered_requirements(tmp_path):
    """Before the first draft a preparation script runs in a dependency image: the repository's
    requirements as a draft takes them (pywin32 and Flask left out), not its file as it is."""
    from arex.drafting.inspect import inspect_repo
    from arex.drafting.requirements import preparation_requirements

    repo = write_repo(tmp_path / "prep", {"make_data.py": "import pandas\n", "requirements.txt": REQUIREMENTS})
    lines, file = preparation_requirements(inspect_repo(repo), [], lambda names, context=(): list(names))
    assert (lines, file) == (["pandas==2.2.3", "scikit-learn==1.6.1"], None)
    plain = write_repo(tmp_path / "plain", {"make_data.py": "import pandas\n", "requirements.txt": "pandas==2.2.3\n"})
    assert preparation_requirements(inspect_repo(plain), [], lambda names, context=(): list(names)) == (
        [],
        "requirements.txt",
    )


# -- revising after requirements rejections ------------------------------------------------------------
def test_every_requirements_rejection_is_revised(tmp_path):
    """Before: 'the heuristic drafter has no rule to revise after: Requirements preflight ...'.
    Now: an exact pin with no wheel is relaxed; a range that still fails is unpinned; conflicting
    pins are unpinned; a package with no version at all is left out; a parent's failing dependency
    unpins the parent."""
    files = {"patients.csv": patients(80), "requirements.txt": "numpy==1.16.6\npandas==2.2.3\nhelpers-internal\n"}
    repo = write_repo(tmp_path / "clinic", files)
    drafter = HeuristicDrafter(pin=False)
    first = drafter.draft(repo, [])
    no_wheel = preflight_reason(Unresolvable(requirement="numpy==1.16.6", name="numpy", versions=["1.23.2", "1.26.4"]))
    assert "requirements_relax: true" in no_wheel
    attempts = [Attempt(draft=first, reason=no_wheel)]
    relaxed = drafter.draft(repo, attempts)
    assert relaxed.spec["requirements_relax"] is True
    still = preflight_reason(Unresolvable(requirement="numpy==1.17.0", name="numpy", versions=[]), relax=True)
    attempts.append(Attempt(draft=relaxed, reason=still))
    unpinned = drafter.draft(repo, attempts)
    assert "numpy\n" in unpinned.add["arex_requirements.txt"] and "numpy==" not in unpinned.add["arex_requirements.txt"]
    conflict = preflight_reason(
        error="Cannot install pandas==2.2.3 and scikit-learn==0.20.0 because these package versions have "
        "conflicting dependencies.; The conflict is caused by:; The user requested pandas==2.2.3; "
        "scikit-learn 0.20.0 depends on scipy>=0.13.3"
    )
    attempts.append(Attempt(draft=unpinned, reason=conflict))
    loosened = drafter.draft(repo, attempts)
    kept = loosened.add["arex_requirements.txt"].splitlines()
    assert "pandas" in kept and not any(line.startswith("pandas==") for line in kept)
    none = preflight_reason(Unresolvable(requirement="helpers-internal", name="helpers-internal", versions=[]))
    attempts.append(Attempt(draft=loosened, reason=none))
    dropped = drafter.draft(repo, attempts)
    assert not any(line.startswith("helpers-internal") for line in dropped.add["arex_requirements.txt"].splitlines())
    parent = preflight_reason(
        Unresolvable(requirement="tokenizers==0.8.1", name="tokenizers", parent="pandas==2.2.3", versions=[])
    )
    revised = drafter.draft(repo, [Attempt(draft=first, reason=parent)])
    assert "pandas\n" in revised.add["arex_requirements.txt"]
    whys = [g.why for g in dropped.guesses if g.field == "revision"]
    assert len(whys) == 4 and "requirements_relax" in whys[0] and "dropped" in whys[3]


def test_pins_still_unresolved_after_relaxing_are_unpinned(monkeypatch, tmp_path):
    """settle's own sentence when relaxing runs out of rounds: the relaxed packages are unpinned."""
    from arex.envs import ml_images

    def preflight(lines, base, no_binary=()):
        pin = next(line for line in lines if line.startswith("numpy=="))
        failure = Unresolvable(requirement=pin, name="numpy", versions=["1.20.0", "1.21.0", "1.22.0", "1.23.0"])
        return Preflight(python="3.11.2", failure=failure)

    monkeypatch.setattr(ml_images, "preflight", preflight)
    with pytest.raises(SourceError) as caught:
        ml_images.settle(["numpy==1.16.6"], "arex-base:latest", relax=True)
    assert "still did not resolve" in str(caught.value)
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(80), "requirements.txt": "numpy==1.16.6\n"})
    drafter = HeuristicDrafter(pin=False)
    first = drafter.draft(repo, [])
    revised = drafter.draft(repo, [Attempt(draft=first, reason=str(caught.value))])
    assert "numpy" in revised.add["arex_requirements.txt"].splitlines()


def test_a_rejection_no_rule_knows_spends_the_budget_and_headroom_tries_the_next_target(tmp_path):
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(80)})
    drafter = HeuristicDrafter(pin=False)
    first = drafter.draft(repo, [])
    assert first.spec["data"]["target"] == "outcome"
    perfect = "gate 'baseline leaves headroom' failed: the baseline already scores the best accuracy (1.000000 ..."
    harder = drafter.draft(repo, [Attempt(draft=first, reason=perfect)])
    assert harder.spec["data"]["target"] != "outcome"
    assert any("already scores the best" in g.why for g in harder.guesses if g.field == "revision")


# -- headroom ------------------------------------------------------------------------------------------------
def test_a_baseline_at_the_metrics_best_fails_the_headroom_gate():
    """Before: a baseline with 1.000 accuracy was accepted (a task nothing can improve)."""
    from arex.envs.ml_gates import _headroom_gate
    from arex.envs.report import GateLog
    from arex.specs import GradeResult, MLSpec

    def spec(metric: str, direction: str) -> MLSpec:
        return MLSpec(
            id="t",
            title="t",
            run="true",
            metric={"name": metric, "direction": direction},
            data={"table": "x.csv", "target": "y"},
        )

    def grade(public: float, private: float) -> GradeResult:
        return GradeResult(
            public_score=public, held_out_score=private, held_out_raw=private, feedback="", details={"public": public}
        )

    log = GateLog()
    assert not _headroom_gate(log, spec("accuracy", "maximize"), grade(1.0, 1.0))
    assert "already scores the best accuracy" in log.gates[-1].detail
    assert not _headroom_gate(log, spec("rmse", "minimize"), grade(0.0, 0.0))
    assert _headroom_gate(log, spec("accuracy", "maximize"), grade(0.98, 1.0))
    assert _headroom_gate(log, spec("rmse", "minimize"), grade(0.2, 0.3))


# -- sources, messages, reports -------------------------------------------------------------------------------
def test_a_clean_git_folder_is_pinned_and_a_dirty_one_recorded(tmp_path):
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(40)})
    head = git.Repo(repo).head.commit.hexsha
    clean = checkout(str(repo))
    assert clean.commit == head and clean.built_from == f"commit {head}"
    draft = Draft(spec={"id": "clinic"})
    source = yaml.safe_load(write_overlay(draft, "clinic", clean, tmp_path / "drafts").read_text())
    assert source["commit"] == head
    (repo / "patients.csv").write_text(patients(41))
    dirty = checkout(str(repo))
    assert dirty.commit is None and f"{head}+worktree" in dirty.built_from and "content sha256 " in dirty.built_from
    text = write_overlay(draft, "clinic", dirty, tmp_path / "drafts").read_text()
    assert "commit" not in yaml.safe_load(text) and f"# Drafted from the working tree at {head}+worktree" in text


def test_an_unreachable_repository_keeps_gits_cause(tmp_path):
    """Before: 'cannot reach file:///...: and the repository exists.' (git's advice, not its cause)."""
    with pytest.raises(SourceError) as caught:
        fetch(MLSource(url=f"file://{tmp_path}/nowhere.git", rev=None, spec=None, origin="x"))
    assert "does not appear to be a git repository" in str(caught.value)


def test_reasons_are_never_cut_mid_word(tmp_path):
    reason = "gate 'baseline runs' failed: " + " ".join(f"word{i:03d}" for i in range(150))
    shown = clip(reason, 400)
    assert shown.endswith(" …") and shown[:-2].split()[-1] in reason.split() and len(shown) <= 402
    result = DraftResult(
        env_id="e",
        source_yaml=tmp_path / "e.yaml",
        accepted=False,
        attempts=[Attempt(draft=Draft(spec={}), reason=reason)],
        seconds=1,
    )
    write_draft_report(result, "src", "heuristic", 1)
    assert "word149" in (tmp_path / "e.draft.md").read_text()
    # the end of a log (a crashed baseline's, pip's) starts at a word
    from arex.envs.ml_source import tail

    end = tail(reason, 300)
    assert end.startswith("… word") and end[2:].split()[0] in reason.split() and end.endswith("word149")


def test_a_build_that_fails_outside_the_draft_is_not_revised(monkeypatch, tmp_path):
    """Seen in this file's Docker test on a host out of memory: the Docker engine went away, and the
    drafter 'revised' after it twice (ending on another target). The build is the edge faked here."""
    from arex.drafting.run import draft_env
    from arex.envs import build
    from arex.envs.report import EnvReport

    down = "SandboxError: Docker engine is not reachable (DockerException); start it with: bash scripts/setup.sh"
    monkeypatch.setattr(build, "build_envs", lambda paths, *a, **k: [EnvReport(str(paths[0]), "clinic", "error", down)])
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(80)})
    said: list[str] = []
    result = draft_env(str(repo), tmp_path / "d", tmp_path / "e", HeuristicDrafter(pin=False), 3, progress=said.append)
    assert len(result.attempts) == 1 and not result.accepted
    assert result.stopped.startswith("the build failed outside the draft") and "Docker engine" in result.stopped
    assert said[:2] == [f"reading {repo}", "attempt 1: drafting"]


def test_a_table_over_the_read_cap_is_sampled_and_said(monkeypatch, tmp_path):
    """Before: a table over the cap was skipped and the draft said 'the repository ships no table'."""
    from arex.drafting import inspect

    monkeypatch.setattr(inspect, "TABLE_READ_CAP", 2048)
    repo = write_repo(tmp_path / "clinic", {"patients.csv": patients(400)})
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    assert draft.spec["data"]["table"] == "patients.csv" and draft.spec["data"]["target"] == "outcome"
    why = {g.field: g.why for g in draft.guesses}["data.table"]
    assert "over the read cap: guessed from its first" in why and "rows (2 KiB of 6 KiB)" in why
    big = write_repo(tmp_path / "sheet", {"patients.xlsx": b"x" * 4096})
    with pytest.raises(DraftError, match=r"patients.xlsx could not be read: .*over the drafter's 2 KiB read cap"):
        HeuristicDrafter(pin=False).draft(big, [])


def test_a_headerless_uci_table_gets_its_names_from_the_code(tmp_path):
    """Found on a census-income repository (E's trial): adult.data (UCI's headerless comma-separated
    form) was not seen as a table: 'the repository ships no table'."""
    rng = random.Random(5)
    rows = []
    for _ in range(120):
        age, hours, work = rng.randint(18, 80), rng.randint(10, 70), rng.choice(["Private", "State-gov", "Self-emp"])
        income = ">50K" if age / 80 + hours / 70 + rng.gauss(0, 0.3) > 1.1 else "<=50K"
        rows.append(f"{age}, {work}, {hours}, {income}")
    main = (
        "import pandas as pd\n"
        "df = pd.read_csv('census_income/adult.data', header=None)\n"
        "df.columns = ['age', 'workclass', 'hours-per-week', 'income']\n"
        "y = df['income']\n"
    )
    repo = write_repo(tmp_path / "census", {"census_income/adult.data": "\n".join(rows) + "\n", "main.py": main})
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    table = draft.spec["data"]["table"]
    assert table == "arex_data/adult_table.csv" and "census_income/adult.data" in draft.remove
    assert (
        draft.add[table].startswith("age,workclass,hours-per-week,income\n")
        and len(draft.add[table].splitlines()) == 121
    )
    assert draft.spec["data"]["target"] == "income"
    why = {g.field: g.why for g in draft.guesses}["data.table"]
    assert "without a header row (column names: the list of 4 names in main.py)" in why


# -- a real build ---------------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.timeout(1800)  # one build; its leak scan of the whole image takes minutes on a loaded two-core host
def test_a_repository_pinning_pandas_and_flask_drafts_in_one_attempt(tmp_path):
    """Before: rejected by the requirements preflight (the draft's pandas/scikit-learn pins beside the
    repository's), then no revision. The pins are the bundled envs', so their dependency image serves."""
    files = {"patients.csv": patients(300, seed=4), "requirements.txt": REQUIREMENTS, "README.md": "# Clinic\n"}
    repo = write_repo(tmp_path / "clinic", files)
    out, envs = tmp_path / "drafts", tmp_path / "envs"
    result = CliRunner().invoke(app, ["draft-env", str(repo), "--out", str(out), "--envs-out", str(envs)])
    assert result.exit_code == 0, result.output
    output = result.output
    stages = ["arex: attempt 1: drafting", "requirements preflight and dependency image", "env image"]
    stages += ["gate: baseline runs", "gate: private labels unreachable", "attempt 1: accepted"]
    positions = [output.find(s) for s in stages]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), output
    source = yaml.safe_load((out / "clinic.yaml").read_text())
    assert source["commit"] == git.Repo(repo).head.commit.hexsha
    assert source["spec"]["requirements_file"] == "arex_requirements.txt"
    report = json.loads((out / "clinic.draft.json").read_text())
    assert report["accepted"] and len(report["attempts"]) == 1 and report["built_from"].startswith("commit ")
    gates = json.loads((envs / "clinic" / ".build.json").read_text())["gates"]
    assert {g["name"] for g in gates} >= {"baseline leaves headroom", "private labels unreachable"}


def test_the_preflight_runs_before_the_first_build(monkeypatch, tmp_path):
    """What the build's requirements preflight would reject is revised before any build: the first
    draft already relaxes an exact pin with no wheel (the build's own sentence), no attempt spent."""
    from arex.envs import ml_images

    seen = []

    def settle(lines, base, build_from_source=(), relax=False, where="the requirements"):
        seen.append((list(lines), relax))
        if "numpy==1.16.6" in lines and not relax:
            failure = Unresolvable(requirement="numpy==1.16.6", name="numpy", versions=["1.23.2"])
            raise SourceError(
                unresolvable_sentence(Preflight(python="3.11.2", failure=failure), base, where, relax, [])
            )
        return ml_images.Settled(list(lines))

    monkeypatch.setattr(ml_images, "settle", settle)
    files = {"patients.csv": patients(80), "requirements.txt": "numpy==1.16.6\npandas\nscikit-learn\nflask\n"}
    repo = write_repo(tmp_path / "clinic", files)
    draft = HeuristicDrafter().draft(repo, [])
    assert draft.spec["requirements_relax"] is True
    assert seen[0][0] == ["numpy==1.16.6", "pandas", "scikit-learn"] and seen[-1][1] is True and len(seen) == 2
    assert any("requirements_relax" in g.why for g in draft.guesses if g.field == "revision")
