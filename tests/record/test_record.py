"""The trajectory record as types: version-1 files read, select and export exactly as the version
that wrote them did; bad lines are named; the writer and the reader agree. No Docker."""

import json
import shutil
from pathlib import Path

import pytest
from repo_paths import TESTS

from arex.dataset.export import ExportConfig, export, kept_records
from arex.record.trajectory import SCHEMA_VERSION, RecordError, RecordWriter, load, parse_line
from arex.sandbox import SandboxConfig
from arex.selection.selector import SelectConfig, select

FIXTURE = TESTS / "fixtures" / "v1"
WRITTEN_AT = "/tmp/fx/v1"  # where the fixture store was when its golden output was made
GOLDEN_CRITERIA_HASH = "81d223e5548d58bb"  # SelectConfig(regrade=False).digest() when the golden was made


@pytest.fixture
def v1(tmp_path) -> Path:
    root = tmp_path / "v1"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("golden"))
    return root


def golden(rel: str, root: Path) -> bytes:
    return _criteria_today((FIXTURE / "golden" / rel).read_bytes().replace(WRITTEN_AT.encode(), str(root).encode()))


def _criteria_today(data: bytes) -> bytes:
    """The golden selection with today's criteria, and the criteria hash they make. Two changed on
    purpose since the golden was made: the default LLM-judge prompt (the trajectory fenced as
    untrusted data, the rubric before and after it; then a separate item for gaming the evaluation)
    its cap on that item (`max_gaming`), and the `exploit_attempts` switch (on by default), so
    verdicts cached under the old criteria are not reused. Nothing else of the golden changes: the
    criteria block is swapped whole, and only after checking that these are its only differences."""
    then = json.loads((FIXTURE / "golden" / "selected" / "selection.json").read_text())["criteria"]
    now = SelectConfig(regrade=False)
    today = now.model_dump()
    assert {key for key in today if today[key] != then.get(key)} == {"llm_judge", "exploit_attempts"}
    judge_then, judge_now = then["llm_judge"], today["llm_judge"]
    assert {key for key in judge_now if judge_now[key] != judge_then.get(key)} == {"prompt", "max_gaming"}
    assert today["exploit_attempts"] is True and set(then) == set(today) - {"exploit_attempts"}

    def block(criteria: dict) -> bytes:  # the criteria as selection.json lays them out
        return json.dumps({"criteria": criteria}, indent=2)[2:-2].encode()

    return data.replace(block(then), block(today)).replace(GOLDEN_CRITERIA_HASH.encode(), now.digest().encode())


def test_every_v1_line_reads_back_unchanged():
    lines = 0
    for path in sorted((FIXTURE / "store").glob("*/*.jsonl")):
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            raw = json.loads(text)
            assert parse_line(raw, path, number, 1).model_dump() == raw, f"{path.name}:{number}"
            lines += 1
    assert lines > 80


def test_v1_store_selects_byte_identically(v1, tmp_path):
    out = tmp_path / "selected"
    selection = select(v1 / "store", v1 / "envs", out, SelectConfig(regrade=False), SandboxConfig())
    assert len(selection.kept) == 3 and len(selection.dropped) == 3
    for name in ("selection.json", "drops.md"):
        expected = golden(f"selected/{name}", v1).replace(str(v1 / "selected").encode(), str(out).encode())
        assert (out / name).read_bytes() == expected, name
    # the verdict cache keeps the same lines, but no longer a drop whose cause can go away (env_missing);
    # each line is written as its verdict completes, so their order is the judging's
    cached = golden("selected/verdicts.jsonl", v1).decode().splitlines(keepends=True)
    written = (out / "verdicts.jsonl").read_text().splitlines(keepends=True)
    assert sorted(written) == sorted(line for line in cached if "env_missing" not in line)
    # kept.jsonl gained each record's checksum (export checks it); the rest of every line is as it was
    kept = [json.loads(line) for line in (out / "kept.jsonl").read_text().splitlines()]
    assert [row.pop("record_sha") for row in kept] == [v.record_sha for v in selection.kept]
    assert "".join(json.dumps(row) + "\n" for row in kept).encode() == golden("selected/kept.jsonl", v1)


@pytest.mark.parametrize(
    "config, folder",
    [
        # With consecutive turns kept apart, the rows are byte for byte the ones the arex that wrote
        # the store exported. The default joins a round's last observation and its reflect prompt
        # (two user turns in a row) into one turn: only those rows differ, pinned in `dataset-bounded`.
        (ExportConfig(merge_consecutive=False), "dataset-bounded-unmerged"),
        (ExportConfig(), "dataset-bounded"),
    ],
    ids=["unmerged", "default"],
)
def test_v1_bounded_records_export_byte_identically(v1, tmp_path, config, folder):
    records = [p for p in sorted((v1 / "store").glob("*/*.jsonl")) if load(p).header.config["context"] == "bounded"]
    assert len(records) == 5
    export(iter(records), tmp_path / "dataset", config, v1 / "envs")
    expected = sorted(
        p.relative_to(FIXTURE / "golden" / folder) for p in (FIXTURE / "golden" / folder).rglob("*") if p.is_file()
    )
    extras = {".arex-export", "README.md", "score_curve.png"}  # the marker and the card: newer than the golden export
    made = sorted(
        p.relative_to(tmp_path / "dataset")
        for p in (tmp_path / "dataset").rglob("*")
        if p.is_file() and p.relative_to(tmp_path / "dataset").as_posix() not in extras
    )
    assert made == expected
    for rel in expected:
        assert (tmp_path / "dataset" / rel).read_bytes() == (FIXTURE / "golden" / folder / rel).read_bytes(), rel


def test_kept_v1_records_export_from_a_selection(v1, tmp_path):
    select(v1 / "store", v1 / "envs", tmp_path / "sel", SelectConfig(regrade=False), SandboxConfig())
    stats = export(kept_records(tmp_path / "sel"), tmp_path / "dataset", ExportConfig(), v1 / "envs")
    assert stats.trajectories == 3 and stats.rows == {"rounds": 9, "trajectories": 3}


def test_writer_and_reader_agree_and_new_records_are_version_2(tmp_path):
    source = FIXTURE / "store" / "subset-fill" / "d9aca56721dc2283.jsonl"
    old = load(source)
    path = tmp_path / "t.jsonl"
    writer = RecordWriter(path)
    writer.write(old.header.model_copy(update={"schema_version": SCHEMA_VERSION}))
    for round_ in old.rounds:
        for line in [round_.start, *round_.steps, round_.end]:
            writer.write(line)
    writer.write(old.end)
    writer.close()
    new = load(path)
    assert new.header.schema_version == 2
    assert new.rounds == old.rounds and new.end == old.end
    assert [r.messages(None) for r in new.rounds] == [r.messages(None) for r in old.rounds]


def test_a_line_of_a_newer_version_or_another_shape_is_named(tmp_path):
    source = (FIXTURE / "store" / "subset-fill" / "d9aca56721dc2283.jsonl").read_text().splitlines()
    newer = tmp_path / "newer.jsonl"
    header = json.loads(source[0])
    newer.write_text(json.dumps({**header, "schema_version": 4}) + "\n")
    with pytest.raises(RecordError, match=r"newer\.jsonl: schema version 4 .*upgrade arex"):
        load(newer)
    bad = tmp_path / "bad.jsonl"
    end = json.loads(next(line for line in source if '"type":"round_end"' in line))
    end["ending"] = "gave_up"  # not an ending this version knows
    bad.write_text("\n".join([source[0], source[1], json.dumps(end)]) + "\n")
    with pytest.raises(RecordError, match=r"bad\.jsonl, line 3: a RoundEnd line .*ending"):
        load(bad)
    stray = tmp_path / "stray.jsonl"
    stray.write_text(source[0] + "\n" + json.dumps({"type": "note"}) + "\n")
    with pytest.raises(RecordError, match=r"stray\.jsonl, line 2: not a trajectory record line"):
        load(stray)


def test_a_cut_round_is_replaced_by_what_its_calls_cost(tmp_path):
    lines = (FIXTURE / "store" / "subset-fill" / "d9aca56721dc2283.jsonl").read_text().splitlines()
    last_start = max(i for i, line in enumerate(lines) if '"type":"round_start"' in line)
    path = tmp_path / "cut.jsonl"
    # a step, then a kill mid-line
    path.write_text("\n".join(lines[: last_start + 2]) + "\n" + lines[last_start + 2][:40])
    t = load(path, truncate=True)
    assert [r.number for r in t.rounds] == [1, 2, 3] and t.end is None
    step = json.loads(lines[last_start + 1])
    [spent] = t.spent
    assert (spent.round, spent.calls, spent.prompt_tokens, spent.completion_tokens) == (
        4,
        1,
        step["call"]["prompt_tokens"],
        step["call"]["completion_tokens"],
    )
    rewritten = path.read_text().splitlines()
    assert rewritten[:-1] == lines[:last_start] and json.loads(rewritten[-1])["type"] == "spent"
    assert load(path).spent == [spent]  # the spent line reads back


def test_damage_before_the_last_line_is_an_error_and_nothing_is_rewritten(tmp_path):
    lines = (FIXTURE / "store" / "subset-fill" / "d9aca56721dc2283.jsonl").read_bytes().splitlines(keepends=True)
    for name, damaged in (("json", lines[3][:50] + b"\n"), ("utf8", lines[3][:50] + b"\xe2\x82\n")):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"".join(lines[:3] + [damaged] + lines[4:]))
        before = path.read_bytes()
        with pytest.raises(RecordError, match=rf"{name}\.jsonl, line 4: damaged"):
            load(path, truncate=True)
        assert path.read_bytes() == before


def test_a_last_line_cut_inside_a_multibyte_character_is_repaired(tmp_path):
    lines = (FIXTURE / "store" / "subset-fill" / "d9aca56721dc2283.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines) + '{"type":"note","text":"é'.encode()[:-1])  # the kill split the é
    t = load(path, truncate=True)
    assert t.end is not None and len(t.rounds) == 4
    assert path.read_bytes() == b"".join(lines)
