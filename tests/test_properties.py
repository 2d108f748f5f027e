"""Property-based tests (hypothesis): arex's readers of user files — the trajectory record, the
config, task specs and judge problem packages — on arbitrary and damaged input. Whatever the
bytes, the only exception that may leave them is arex's own (`ArexError`: one sentence naming the
file, no traceback at the CLI); anything else is a bug, and hypothesis prints the smallest input
that shows it. Example counts are bounded: the file runs in well under 30 s.
"""

from __future__ import annotations

import json
import shutil
import string
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from repo_paths import TESTS

from arex.config import ArexConfig, load_config
from arex.envs import judge_sources
from arex.errors import ArexError
from arex.record.trajectory import SCHEMA_VERSION, Spent, load
from arex.specs import JudgeSpec, MLSpec, load_task_spec, read_spec_yaml, validate_spec

pytestmark = pytest.mark.suite  # a reliability suite: run by `make test`, not `make test-fast`

FIXTURE = TESTS / "fixtures" / "v1" / "store"
SETTINGS = dict(
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@contextmanager
def scratch():
    folder = Path(tempfile.mkdtemp(prefix="arex-prop-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def arex_errors_only(fn, *args, **kwargs):
    """Call fn; an ArexError is a fine answer (returned), anything else propagates and fails."""
    try:
        return fn(*args, **kwargs)
    except ArexError as exc:
        return exc


# -- values ---------------------------------------------------------------------------------------
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "0", "-1", "1e400", "nan", "true", "null", "2s", "256m", "x" * 300, "../etc/passwd", "a/b",
                     "é✓"]),
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


# -- the trajectory record ------------------------------------------------------------------------
def _v2_seed() -> bytes:
    """A version-2 record: a v1 fixture's lines (they read back unchanged) under a v2 header, and
    a spent line."""
    lines = (FIXTURE / "ml-diabetes" / "2a77a2f71d80fe17.jsonl").read_text(encoding="utf-8").splitlines()
    header = {**json.loads(lines[0]), "schema_version": SCHEMA_VERSION}
    spent = Spent(
        round=9, calls=2, prompt_tokens=10, completion_tokens=5, cost_usd=0.5, reason="cut short ✓"
    ).model_dump()
    return "".join(
        line + "\n"
        for line in [
            json.dumps(header, ensure_ascii=False),
            *lines[1:-1],
            json.dumps(spent, ensure_ascii=False),
            lines[-1],
        ]
    ).encode()


SEEDS = [
    (FIXTURE / "subset-fill" / "d902a479abd0d1a0.jsonl").read_bytes(),
    (FIXTURE / "ml-diabetes" / "2a77a2f71d80fe17.jsonl").read_bytes(),
    _v2_seed(),
]
LINE_TYPES = ["header", "round_start", "step", "round_end", "spent", "end", "other", 7, None, [], {}]
record_lines = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"type": st.sampled_from(LINE_TYPES)},
            optional={"schema_version": json_values, "round": json_values, "step": json_values, "call": json_values},
        ),
        json_values,
    ).map(lambda v: json.dumps(v, allow_nan=True)),
    max_size=6,
).map(lambda lines: "".join(line + "\n" for line in lines).encode())


def _load_both_ways(data: bytes) -> None:
    with scratch() as folder:
        path = folder / "r.jsonl"
        path.write_bytes(data)
        arex_errors_only(load, path)
        arex_errors_only(load, path, truncate=True, keep_end=False)


@settings(max_examples=200, **SETTINGS)
@given(st.one_of(st.binary(max_size=400), st.text(max_size=200).map(str.encode), record_lines))
@example(b'{"type": []}\n')
@example(b'{"type": {}}\n{}\n')
@example(b"[" * 3000 + b"\n")
@example(b'{"type": "header", "schema_version": ' + b"9" * 4400 + b"}\n")
@example(b"\xff\xfe\n")
def test_record_reader_on_arbitrary_bytes(data):
    _load_both_ways(data)


DAMAGE = st.sampled_from(["flip", "replace", "insert", "delete", "invalid-utf8"])


@settings(max_examples=150, **SETTINGS)
@given(st.sampled_from(range(len(SEEDS))), DAMAGE, st.floats(0, 1), st.binary(min_size=1, max_size=8))
def test_record_reader_on_damaged_records(seed, damage, at, junk):
    data = bytearray(SEEDS[seed])
    i = min(len(data) - 1, int(at * len(data)))
    if damage == "flip":
        data[i] ^= 1 << (junk[0] % 8)
    elif damage == "replace":
        data[i : i + len(junk)] = junk
    elif damage == "insert":
        data[i:i] = junk
    elif damage == "delete":
        del data[i : i + 1 + junk[0]]
    else:
        data[i:i] = b"\xc3" if junk[0] % 2 else b"\xff"
    _load_both_ways(bytes(data))


@settings(max_examples=120, **SETTINGS)
@given(st.sampled_from(range(len(SEEDS))), st.floats(0, 1))
def test_a_record_cut_anywhere_loads_as_its_complete_rounds(seed, at):
    """A kill mid-write cuts the last line anywhere, even inside a multibyte character: the record
    still loads, as a prefix of its rounds, and a resume rewrites it whole."""
    data = SEEDS[seed]
    cut = int(at * len(data))
    with scratch() as folder:
        whole, path = folder / "whole.jsonl", folder / "cut.jsonl"
        whole.write_bytes(data)
        path.write_bytes(data[:cut])
        full = [r.number for r in load(whole).rounds]
        got = [r.number for r in load(path).rounds]
        assert got == full[: len(got)]
        load(path, truncate=True)
        assert path.read_bytes().endswith(b"\n") or path.read_bytes() == b""
        assert [r.number for r in load(path).rounds] == got


# -- the config loader ------------------------------------------------------------------------------
def _dotted_keys(model, prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        keys.append(prefix + name)
        if hasattr(field.annotation, "model_fields"):
            keys += _dotted_keys(field.annotation, f"{prefix}{name}.")
    return keys


CONFIG_KEYS = _dotted_keys(ArexConfig)
TRICKY_YAML = [
    "a: &x [*x]\n", "sandbox: &s {backend: *s}\n", "!!python/object/apply:os.system ['true']\n", "? [a, b]\n: c\n",
    "---\na: 1\n---\nb: 2\n", "sandbox: !!binary aGVsbG8=\n", "teacher: {prices: {m: {input: .nan, output: .inf}}}\n",
    "rollout:\n  rounds: 1e400\n", "rollout: {rounds: 2001-12-14}\n", "teacher:\n  prices: !!set {a, b}\n", "[1, 2]\n",
    "'just text'\n", "rollout:\n\trounds: 3\n", "\ufeffrollout: {rounds: 2}\n", "sandbox: {memory: -1g}\n",
    "select: {tolerance: {judge: [1]}}\n", "teacher: {prices: [1]}\n", "rollout: {context: [bounded]}\n",
    "export: {granularities: {a: 1}}\n",
]  # fmt: skip
sections = st.sampled_from(["sandbox", "teacher", "rollout", "select", "export", "other"])
config_layers = st.dictionaries(
    sections, st.dictionaries(st.sampled_from(CONFIG_KEYS + ["x"]), json_values, max_size=4) | json_values, max_size=3
)
config_files = st.one_of(
    st.binary(max_size=300), st.text(max_size=200).map(str.encode), st.sampled_from(TRICKY_YAML).map(str.encode),
    config_layers.map(lambda d: yaml.safe_dump(d, allow_unicode=True).encode()),
)  # fmt: skip
dotted = st.sampled_from(CONFIG_KEYS) | st.from_regex(
    r"[A-Za-z_][A-Za-z0-9_]{0,6}(\.[A-Za-z_][A-Za-z0-9_]{0,6}){0,3}", fullmatch=True
)
overrides = st.tuples(dotted, st.text(max_size=30) | st.sampled_from(TRICKY_YAML)).map("=".join)


@settings(max_examples=200, **SETTINGS)
@given(config_files, st.lists(overrides, max_size=4), st.booleans())
@example(b"a: &x [*x]\n", [], True)
@example(b"", ["teacher.prices=[1]"], True)
@example(b"", ["rollout=&x [*x]"], False)
def test_config_loader_on_arbitrary_files_and_overrides(data, items, file_first):
    with scratch() as folder:
        path = folder / "config.yaml"
        path.write_bytes(data)
        arex_errors_only(load_config, [str(path), *items] if file_first else [*items, str(path)])


# -- task specs -------------------------------------------------------------------------------------
def _mutated(model, base: dict) -> st.SearchStrategy:
    """`base` with some of `model`'s keys (and a few unknown ones) replaced by arbitrary values."""
    keys = list(model.model_fields) + ["unknown", "kind"]
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=4).map(lambda changes: {**base, **changes})


JUDGE_BASE = {
    "id": "p",
    "title": "P",
    "time_limit_s": 1,
    "tests": [{"name": "t", "input": "tests/t.in", "answer": "tests/t.ans"}],
}
ML_BASE = {
    "id": "m",
    "kind": "ml",
    "title": "M",
    "run": "python3 train.py",
    "metric": {"name": "rmse", "direction": "minimize"},
    "data": {"table": "d.csv", "target": "y"},
}
spec_values = st.one_of(_mutated(JudgeSpec, JUDGE_BASE), _mutated(MLSpec, ML_BASE), json_values)


@settings(max_examples=150, **SETTINGS)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.sampled_from(TRICKY_YAML).map(str.encode),
        spec_values.map(lambda v: yaml.safe_dump(v, allow_unicode=True).encode()),
    )
)
@example(b"kind: []\n")
@example(b"kind: {a: 1}\n")
def test_task_spec_loader_on_arbitrary_files(data):
    with scratch() as folder:
        path = folder / "task.yaml"
        path.write_bytes(data)
        arex_errors_only(read_spec_yaml, path)
        arex_errors_only(load_task_spec, path)
        arex_errors_only(load_task_spec, path, MLSpec)


@settings(max_examples=150, **SETTINGS)
@given(st.sampled_from([JudgeSpec, MLSpec]), spec_values)
def test_validate_spec_on_arbitrary_values(model, raw):
    arex_errors_only(validate_spec, model, raw, "task.yaml")


# -- judge problem packages -------------------------------------------------------------------------
names = st.text(string.ascii_lowercase + string.digits + "-_.", min_size=1, max_size=8).filter(
    lambda n: n not in (".", "..")
)
contents = st.one_of(
    st.binary(max_size=60),
    st.text(max_size=60).map(str.encode),
    json_values.map(lambda v: yaml.safe_dump(v, allow_unicode=True).encode()),
)


def _yaml_of(base: dict, keys: list[str]) -> st.SearchStrategy:
    changes = st.dictionaries(st.sampled_from(keys), json_values, max_size=3)
    return st.one_of(changes.map(lambda c: yaml.safe_dump({**base, **c}, allow_unicode=True).encode()), contents)


def _tests_tree(folder: str, with_groups: bool) -> st.SearchStrategy:
    """Test files under `folder`: mostly .in/.ans pairs (in groups: sample/, secret/, secret/<g>/),
    now and then an input without its answer or a stray file."""
    group = st.sampled_from(["secret", "secret/g1", "secret/g2", "sample", "other"]) if with_groups else st.just("")
    stem = st.tuples(group, names).map(lambda t: "/".join(p for p in t if p))
    case = st.tuples(stem, contents, contents, st.sampled_from(["pair", "pair", "pair", "in only", "stray"]))

    def files(cases) -> dict[str, bytes]:
        out = {}
        for name, inp, ans, shape in cases:
            out[f"{folder}/{name}.in" if shape != "stray" else f"{folder}/{name}.txt"] = inp
            if shape == "pair":
                out[f"{folder}/{name}.ans"] = ans
        return out

    return st.lists(case, max_size=4).map(files)


AREX_TASK = {"id": "p", "title": "P", "time_limit_s": 1}
arex_packages = st.tuples(
    st.fixed_dictionaries({"task.yaml": _yaml_of(AREX_TASK, ["title", "time_limit_s", "statement", "solutions",
                                                             "checker", "starter", "memory_mb", "tests", "languages"])},
                          optional={"statement.md": contents, "workspace/solution.py": contents,
                                    "private/checker/check.py": contents, "solutions/ok.py": contents}),
    _tests_tree("private/tests", False),
)  # fmt: skip
KATTIS_META = {"name": "Add", "limits": {"time_limit": 1}}
kattis_packages = st.tuples(
    st.fixed_dictionaries({"problem.yaml": _yaml_of(KATTIS_META, ["name", "limits", "type", "validation",
                                                                  "validator_flags", "id"])},
                          optional={"problem_statement/problem.en.tex": contents, "statement/problem.md": contents,
                                    "output_validators/v/validate.py": contents, "submissions/accepted/a.py": contents,
                                    "data/secret/g1/testdata.yaml": _yaml_of({"accept_score": 1},
                                                                             ["accept_score", "max_score"])}),
    _tests_tree("data", True),
)  # fmt: skip
FRONTIER_CONFIG = {"type": "default", "time": "1s", "memory": "256m", "subtasks": [{"n_cases": 1}], "checker": "chk.cc"}
frontier_packages = st.tuples(
    st.fixed_dictionaries({"config.yaml": _yaml_of(FRONTIER_CONFIG, ["type", "time", "memory", "subtasks", "checker",
                                                                     "input_suffix", "output_suffix", "input_prefix",
                                                                     "time_limit"]),
                           "statement.txt": contents},
                          optional={"chk.cc": contents, "testdata/1.in": contents, "testdata/1.ans": contents,
                                    "solutions/best.py": contents}),
    _tests_tree("testdata", False),
)  # fmt: skip
CC_ROW = {
    "name": "A",
    "description": "d",
    "public_tests": {"input": ["1\n"], "output": ["1\n"]},
    "private_tests": {"input": ["2\n"], "output": ["2\n"]},
}
cc_keys = [
    "name",
    "description",
    "public_tests",
    "private_tests",
    "generated_tests",
    "solutions",
    "incorrect_solutions",
    "time_limit",
    "memory_limit_bytes",
]
cc_rows = st.dictionaries(st.sampled_from(cc_keys), json_values, max_size=3).map(lambda c: {**CC_ROW, **c})
cc_files = st.one_of(
    st.lists(cc_rows | json_values, max_size=3).map(
        lambda rows: ("rows.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())),
    (cc_rows | json_values).map(lambda v: ("rows.json", json.dumps(v).encode())),
    contents.map(lambda b: ("rows.json", b)),
)  # fmt: skip


def _import(files: dict[str, bytes]) -> None:
    with scratch() as folder:
        root = folder / "problem"
        for rel, data in files.items():
            path = root / rel
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                pass  # a name used both as a file and as a folder: keep the first
        root.mkdir(exist_ok=True)
        arex_errors_only(judge_sources.load, root)


OK_AREX = {
    "task.yaml": b"id: p\ntitle: P\ntime_limit_s: 1\n",
    "statement.md": b"s",
    "private/tests/a.in": b"1",
    "private/tests/a.ans": b"1",
}
OK_KATTIS = {
    "problem.yaml": b"name: Add\n",
    "problem_statement/problem.en.tex": b"s",
    "data/secret/g1/a.in": b"1",
    "data/secret/g1/a.ans": b"1",
}
OK_FRONTIER = {
    "config.yaml": b"time: 1s\nmemory: 256m\nsubtasks: [{n_cases: 1}]\n",
    "statement.txt": b"s",
    "chk.cc": b"",
    "testdata/1.in": b"1",
    "testdata/1.ans": b"1",
}
# Below, each @example is the smallest input found (by these strategies, shrunk by hand) that made
# a loader raise something other than an ArexError; they stay as regression cases.


@settings(max_examples=150, **SETTINGS)
@given(arex_packages)
@example(({"task.yaml": b"\x80"}, {}))
@example(({**OK_AREX, "task.yaml": b"id: p\ntitle: P\ntime_limit_s: 1\nstatement: null\n"}, {}))
@example(({**OK_AREX, "task.yaml": b"id: p\ntitle: P\ntime_limit_s: 1\nsolutions: null\n"}, {}))
@example(({**OK_AREX, "task.yaml": b"id: p\ntitle: P\ntime_limit_s: 1\nsolutions: [x]\n"}, {}))
@example(({**OK_AREX, "task.yaml": b"id: p\ntitle: P\ntime_limit_s: 1\nchecker: [x]\n"}, {}))
def test_arex_problem_folders_import_or_say_why(package):
    _import({**package[0], **package[1]})


@settings(max_examples=150, **SETTINGS)
@given(kattis_packages)
@example(({"problem.yaml": b"\x80"}, {}))
@example(({**OK_KATTIS, "problem.yaml": b"name: Add\nlimits: 1.5\n"}, {}))
@example(({**OK_KATTIS, "problem.yaml": b"name: Add\nlimits: {memory: [1]}\n"}, {}))
@example(({**OK_KATTIS, "problem.yaml": b"name: Add\nlimits: {time_limit: x}\n"}, {}))
@example(({**OK_KATTIS, "data/secret/g1/testdata.yaml": b"accept_score: [1]\n"}, {}))
def test_kattis_packages_import_or_say_why(package):
    _import({**package[0], **package[1]})


@settings(max_examples=150, **SETTINGS)
@given(frontier_packages)
@example(({"config.yaml": b"\x80", "statement.txt": b""}, {}))
@example(({**OK_FRONTIER, "config.yaml": b"time: 1s\nmemory: 256m\nsubtasks: null\n"}, {}))
@example(({**OK_FRONTIER, "config.yaml": b"time: 1s\nmemory: 256m\nsubtasks: [null]\n"}, {}))
@example(({**OK_FRONTIER, "config.yaml": b"time: 1s\nmemory: 256m\nsubtasks: [{n_cases: x}]\n"}, {}))
@example(({**OK_FRONTIER, "config.yaml": b"time: 1s\nmemory: 256m\nsubtasks: [{n_cases: 1}]\nchecker: []\n"}, {}))
@example(
    (
        {
            **OK_FRONTIER,
            "config.yaml": b"time: 1s\nmemory: 256m\nsubtasks: [{n_cases: 1}]\ninput_prefix: " + b"x" * 300 + b"\n",
        },
        {},
    )
)
def test_frontier_problems_import_or_say_why(package):
    _import({**package[0], **package[1]})


def _row(**fields) -> tuple[str, bytes]:
    return "rows.json", json.dumps({"name": "A", "description": "d", **fields}).encode()


@settings(max_examples=150, **SETTINGS)
@given(cc_files)
@example(("rows.json", b"\x80"))
@example(("rows.json", b"0"))
@example(("rows.json", b"[[]]"))
@example(_row(public_tests=[1]))
@example(_row(public_tests={"input": [1], "output": [1]}))
@example(_row(solutions=True))
@example(_row(time_limit=[1]))
@example(_row(memory_limit_bytes=[1]))
@example(_row(memory_limit_bytes="x"))
def test_codecontests_files_import_or_say_why(named):
    name, data = named
    with scratch() as folder:
        (folder / name).write_bytes(data)
        arex_errors_only(judge_sources.load, folder / name)
