"""Each selection criterion on synthetic records: a clean trajectory passes every one, and each
change below trips exactly the reason it is about. No Docker, no model."""

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from repo_paths import TESTS

from arex.envs.runtime import load_env
from arex.record.snapshots import SnapshotStore
from arex.record.trajectory import (
    Action,
    Best,
    Call,
    End,
    Header,
    Reflection,
    Round,
    RoundEnd,
    RoundStart,
    Step,
    Trajectory,
)
from arex.sandbox import SandboxConfig
from arex.selection.criteria import CRITERIA, PRECONDITIONS
from arex.selection.selector import SelectConfig, Selector
from arex.specs import GradeResult, TeacherIdentity

FIXTURE = TESTS / "fixtures" / "v1"
JUDGE = load_env(FIXTURE / "envs" / "subset-fill")  # baseline 0.98028425, nothing protected
ML = load_env(FIXTURE / "envs" / "ml-diabetes")  # protects make_data.py and the data files
COMPLETE = "REVIEW: r\nDIAGNOSE: d\nPLAN: p\nSTATE: s"


def call(content: str, status: str = "ok") -> Call:
    return Call(sampling={}, content=content, status=status, model="m")


def step(n: int, i: int, command: str) -> Step:
    kind = "submit" if command == "submit" else ("invalid" if command == "" else "command")
    return Step(
        round=n,
        step=i,
        call=call(f"```bash\n{command}\n```"),
        action=Action(kind=kind, command=command),
        observation=None if kind == "submit" else "out",
    )


def round_(
    n: int,
    held: float,
    submission: str,
    ending: str = "submitted",
    reflection: str = COMPLETE,
    commands=None,
    snapshot=None,
) -> Round:
    commands = commands if commands is not None else [f"edit {n}", "submit"]
    grade = GradeResult(public_score=held, held_out_score=held, held_out_raw=held, feedback="f")
    end = RoundEnd(
        round=n, ending=ending, submission=submission, snapshot=snapshot, grade=grade, feedback="f",
        reflect_prompt="reflect", reflection=Reflection(call=call(reflection), complete=reflection == COMPLETE),
        state="s", best=Best(round=n, held_out=held, public=held),
    )  # fmt: skip
    return Round(start=RoundStart(round=n, context=[]), steps=[step(n, i, c) for i, c in enumerate(commands)], end=end)


def trajectory(env=JUDGE, held=(0.98028425, 0.99, 1.0), status="done", path=None, **changes) -> Trajectory:
    rounds = [round_(n, h, f"solution {n}") for n, h in enumerate(held, 1)]
    header = Header(
        schema_version=2, key="k", env_id=env.id, env_kind=env.kind, spec_hash=env.spec_hash, sample=0,
        teacher=TeacherIdentity(base_url="u", model="m"),
        sampling={}, config_hash="c", config={"context": "bounded"}, arex_version="0", started_at=0.0,
    )  # fmt: skip
    end = End(status=status, reason="because", rounds=len(rounds))
    t = Trajectory(path=path or Path("/nonexistent/k.jsonl"), header=header, rounds=rounds, end=end)
    return t.model_copy(update=changes)


def reasons(t: Trajectory, env=JUDGE, config: SelectConfig = SelectConfig(regrade=False)) -> list[str]:
    found = []
    for criterion in PRECONDITIONS:
        drop = criterion(t, env, config)
        if drop:
            return [drop.reason]
    for criterion in CRITERIA:
        drop = criterion(t, env, config)
        if drop:
            assert drop.detail, criterion.__name__
            found.append(drop.reason)
    return found


def with_round(t: Trajectory, index: int, **changes) -> Trajectory:
    rounds = list(t.rounds)
    old = rounds[index]
    rounds[index] = old.model_copy(update={"end": old.end.model_copy(update=changes.pop("end", {})), **changes})
    return t.model_copy(update={"rounds": rounds})


def test_a_clean_trajectory_passes_every_criterion():
    assert reasons(trajectory()) == []


CASES = {
    "no_rounds": lambda: (trajectory(rounds=[]), JUDGE),
    "env_missing": lambda: (trajectory(), None),
    "env_changed": lambda: (trajectory(header=trajectory().header.model_copy(update={"spec_hash": "0" * 16})), JUDGE),
    "unfinished": lambda: (trajectory(end=None), JUDGE),
    "infra_failure": lambda: (trajectory(status="infra_failed"), JUDGE),
    "teacher_error": lambda: (trajectory(status="context_overflow"), JUDGE),
    "budget_overrun": lambda: (trajectory(status="budget"), JUDGE),
    "below_baseline": lambda: (trajectory(held=(0.5, 0.99, 0.97)), JUDGE),
    "no_improvement": lambda: (trajectory(held=(1.0, 0.99, 1.0)), JUDGE),
    "protocol": lambda: (with_round(trajectory(), 1, end={"ending": "step_limit"}), JUDGE),
    "missing_reflection": lambda: (
        with_round(trajectory(), 2, end={"reflection": Reflection(call=call("I think it is fine"))}),
        JUDGE,
    ),
    "repeated_actions": lambda: (
        with_round(trajectory(), 0, steps=[step(1, i, "ls") for i in range(4)] + [step(1, 4, "submit")]),
        JUDGE,
    ),
}


@pytest.mark.parametrize("reason", sorted(CASES))
def test_each_reason_is_tripped_by_its_own_change(reason):
    t, env = CASES[reason]()
    assert reasons(t, env) == [reason]


def test_unchanged_resubmits_and_best_below_baseline_are_their_own_reasons():
    t = trajectory(held=(0.98028425, 0.99, 0.99, 0.99, 0.99, 0.99, 1.0))  # rounds 2-6: four resubmits
    rounds = [
        r.model_copy(update={"end": r.end.model_copy(update={"submission": "same"})}) if 1 <= i <= 5 else r
        for i, r in enumerate(t.rounds)
    ]
    assert reasons(t.model_copy(update={"rounds": rounds})) == ["unchanged_resubmits"]
    assert reasons(trajectory(), config=SelectConfig(regrade=False, min_best_over_baseline=0.5)) == [
        "best_below_baseline"
    ]


def test_a_present_but_incomplete_reflection_passes_when_presence_is_enough():
    t = with_round(trajectory(), 2, end={"reflection": Reflection(call=call("I think it is fine"))})
    assert reasons(t, config=SelectConfig(regrade=False, reflection="present")) == []
    empty = with_round(trajectory(), 2, end={"reflection": Reflection(call=call("", status="empty"))})
    assert reasons(empty, config=SelectConfig(regrade=False, reflection="present")) == ["missing_reflection"]


def _ml_trajectory(tmp_path: Path, edit: dict[str, bytes] | None = None, keep_snapshot: bool = True) -> Trajectory:
    """An ML trajectory whose rounds point at a real workspace archive (the fixture's), with
    members replaced by `edit`."""
    path = tmp_path / "ml-diabetes" / "k.jsonl"
    store = SnapshotStore(path.with_suffix("") / "snapshots")
    source = next((FIXTURE / "store" / "ml-diabetes" / "2a77a2f71d80fe17" / "snapshots").glob("*.tar"))

    def copy(out) -> None:
        with tarfile.open(source) as old, tarfile.open(fileobj=out, mode="w:") as new:
            for info in old:  # an archive our own sandbox made, read (not extracted)
                data = (edit or {}).get(info.name.removeprefix("./"))
                if data is not None:
                    info.size = len(data)
                new.addfile(
                    info, io.BytesIO(data) if data is not None else (old.extractfile(info) if info.isreg() else None)
                )

    sha = store.save(copy) if keep_snapshot else "f" * 64
    t = trajectory(env=ML, held=(-62.0, -60.0), path=path)
    return t.model_copy(
        update={"rounds": [r.model_copy(update={"end": r.end.model_copy(update={"snapshot": sha})}) for r in t.rounds]}
    )


def test_protected_files_are_compared_byte_for_byte_in_the_archives(tmp_path):
    assert reasons(_ml_trajectory(tmp_path / "a"), ML) == []
    changed = _ml_trajectory(tmp_path / "b", {"data/test.csv": b"id,progression\n1,0\n"})
    assert reasons(changed, ML) == ["protected_file_changed"]


def test_a_missing_archive_is_no_snapshot(tmp_path):
    assert reasons(_ml_trajectory(tmp_path, keep_snapshot=False), ML) == ["no_snapshot"]
    # re-grading needs the archives too, even where no file is protected
    assert reasons(trajectory(), JUDGE, SelectConfig(regrade=True)) == ["no_snapshot"]


def test_a_corrupt_archive_is_bad_snapshot_and_nothing_else_runs_on_it(tmp_path):
    t = _ml_trajectory(tmp_path)
    archive = SnapshotStore(t.path.with_suffix("") / "snapshots").path(t.rounds[-1].end.snapshot)
    archive.write_bytes(archive.read_bytes()[:700])  # cut inside a member
    t.path.parent.mkdir(parents=True, exist_ok=True)
    from arex.record.trajectory import RecordWriter

    writer = RecordWriter(t.path)
    for line in [t.header, *(x for r in t.rounds for x in (r.start, *r.steps, r.end)), t.end]:
        writer.write(line)
    writer.close()
    envs = tmp_path / "envs"
    shutil.copytree(ML.dir, envs / "ml-diabetes")
    selector = Selector(SelectConfig(regrade=False), {"ml-diabetes": load_env(envs / "ml-diabetes")}, SandboxConfig())
    verdict = selector.check(t.path)
    assert not verdict.kept and verdict.reasons == ["bad_snapshot"]


def _fixture_copy(tmp_path: Path) -> Path:
    root = tmp_path / "v1"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("golden"))
    return root


def test_an_unreadable_record_is_a_drop_naming_its_line_and_the_others_are_judged(tmp_path):
    from arex.selection.selector import select

    root = _fixture_copy(tmp_path)
    path = root / "store" / "subset-fill" / "d9aca56721dc2283.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2] + [b"\xff\xfe not utf-8\n"] + lines[2:]))
    selection = select(root / "store", root / "envs", tmp_path / "sel", SelectConfig(regrade=False), SandboxConfig())
    [bad] = [v for v in selection.dropped if v.key == "d9aca56721dc2283"]
    assert (
        bad.reasons == ["unreadable_record"]
        and "d9aca56721dc2283.jsonl, line 3: damaged" in bad.details["unreadable_record"]
    )
    assert len(selection.kept) == 2 and len(selection.dropped) == 4


def test_a_drop_whose_cause_went_away_is_judged_again(tmp_path):
    from arex.selection.selector import select

    root = _fixture_copy(tmp_path)
    moved = tmp_path / "away"
    shutil.move(root / "envs" / "ml-diabetes", moved)
    first = select(root / "store", root / "envs", tmp_path / "sel", SelectConfig(regrade=False), SandboxConfig())
    assert {v.key: v.reasons for v in first.dropped}["2a77a2f71d80fe17"] == ["env_missing"]
    shutil.move(moved, root / "envs" / "ml-diabetes")  # the env is back
    second = select(root / "store", root / "envs", tmp_path / "sel", SelectConfig(regrade=False), SandboxConfig())
    assert "2a77a2f71d80fe17" in [v.key for v in second.kept]
    # what follows from the record alone stays cached: the local teacher's drops are not judged again
    cached = [json.loads(line) for line in (tmp_path / "sel" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(row["key"] for row in cached if not row["kept"]) == ["11b665b9233ca22f", "e354bdd22e369e95"]


@pytest.mark.parametrize("damage", ["missing", "latin-1"])
def test_an_env_with_an_unreadable_statement_is_named(tmp_path, damage):
    from arex.specs import SpecError

    env_dir = tmp_path / "subset-fill"
    shutil.copytree(JUDGE.dir, env_dir)
    if damage == "missing":
        (env_dir / "statement.md").unlink()
    else:
        (env_dir / "statement.md").write_bytes("Énoncé".encode("latin-1"))
    with pytest.raises(SpecError, match=r"subset-fill/statement\.md cannot be read"):
        load_env(env_dir)
