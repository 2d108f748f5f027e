"""The table of env kinds (arex.specs.KINDS) is the one place a kind's parts are named: each row's
parts resolve to what they claim to be, and no module outside the table tells kinds apart by name."""

import ast

import pytest
from repo_paths import REPO

from arex.envs.runtime import KINDS as RUNTIME_KINDS
from arex.envs.runtime import Env
from arex.specs import DEFAULT_KIND, KINDS, Kind, SpecError, kind_named, source_kind, spec_model

ARX = REPO / "arex"
PARTS = ("env", "spec", "source", "build", "env_id", "facts")


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_row_names_parts_that_exist_and_agree(name):
    row = KINDS[name]
    assert isinstance(row, Kind)
    env = row.part("env")
    assert issubclass(env, Env) and env.kind == name  # records carry env.kind: it is the row's name
    assert row.spec_model is env.spec_model  # the env validates its task.yaml as its row says
    assert all(row.part(p) is not None or getattr(row, p) is None for p in PARTS)
    assert (row.source is None) == (row.build is None)  # a kind that claims sources builds them


def test_the_runtime_reads_the_same_table_and_the_default_kind_is_in_it():
    assert RUNTIME_KINDS is KINDS and DEFAULT_KIND in KINDS
    assert KINDS[DEFAULT_KIND].source is None  # it takes the sources no other kind claims


def test_an_unknown_kind_is_one_spec_error_naming_the_known_ones(tmp_path):
    with pytest.raises(SpecError, match="unknown kind 'quantum'; known kinds: judge, ml"):
        spec_model({"kind": "quantum"}, tmp_path / "task.yaml")
    with pytest.raises(SpecError, match="unknown kind"):
        kind_named(["judge"], tmp_path / "task.yaml")


def test_sources_go_to_the_kind_that_claims_them(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "arex.yaml").write_text("id: r\n")
    (tmp_path / "problem").mkdir()
    assert source_kind(tmp_path / "repo") == "ml" and source_kind(tmp_path / "problem") == DEFAULT_KIND


def test_a_bare_env_class_is_a_row_of_that_class_only(monkeypatch):
    class Bare(Env):
        kind = "bare"
        spec_model = dict

    monkeypatch.setitem(KINDS, "bare", Bare)
    row = kind_named("bare", "task.yaml")
    assert row.part("env") is Bare and row.spec_model is dict and row.build is None


def test_no_module_outside_the_table_compares_a_kind_name():
    """A branch on a kind's name (`kind == "ml"`) is a question the table answers."""
    asking = []
    for path in ARX.rglob("*.py"):
        if "data" in path.relative_to(ARX).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Constant) and s.value in KINDS for s in sides):
                    asking.append(f"{path.relative_to(ARX)}:{node.lineno}")
    assert asking == []
