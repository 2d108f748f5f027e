"""Kattis/BAPCtools packages read without Docker: the plan of a generators/generators.yaml (names,
numbering, seeds, counts, includes, and every malformed key named), 2025-09 include/ files and
`.timelimit`. The plans run in a sandbox in tests/envs/test_corpus.py (the corpus build)."""

import hashlib
import shutil
from pathlib import Path

import pytest
from repo_paths import TESTS

from arex.envs import judge_generate
from arex.envs.judge_sources import SourceError, load, source_files
from arex.envs.sources.generators import fill_arguments, group_args, plan_generators
from arex.sandbox import SandboxConfig

CORPUS = TESTS / "corpus"


class Started(Exception):
    """A sandbox was asked for."""


def test_the_plan_names_numbers_and_seeds_as_bapctools():
    plan = plan_generators(CORPUS / "kattis-generators", None, "/submissions/accepted/total.py")
    paths = [c.path for c in plan.cases]
    # One counter over every numbered test case of the file (width from their total, 15: two
    # digits), one per directory for groups; count: adds -<count>; include: links a case in.
    assert paths[:4] == ["sample/1", "sample/2", "secret/01-random", "secret/02-counted-1"]
    assert "secret/1-large/1-huge/09-a" in paths and "secret/1-large/11-bigger" in paths
    assert ["secret/12-salted-2", "secret/13-salted-3"] == [p for p in paths if "salted" in p]
    assert paths[-1] == "secret/1" and plan.cases[-1].same_as == "sample/1"
    by_path = {c.path: c for c in plan.cases}
    random = by_path["secret/01-random"]
    assert random.seed == int(hashlib.sha512(b"random.cpp 50 {seed}").hexdigest(), 16) % 2**31
    assert fill_arguments(random, random.seed) == ["50", str(random.seed)]
    # A count other than 1 and a salt change the seed: ":<count-1>" and the salt go first.
    salted = by_path["secret/13-salted-3"]
    assert salted.seed == int(hashlib.sha512(b"x:2random.cpp 7 {seed}").hexdigest(), 16) % 2**31
    assert by_path["secret/03-counted-2"].command == ["listgen", "2", "{seed}"]
    assert {c.how for c in plan.cases} == {"inline", "copied", "generated", "included"}
    assert by_path["secret/06-self"].solution == "/submissions/accepted/total.py"  # the default
    assert plan.programs["listgen"].entry == "listgen.py" and len(plan.programs["listgen"].files) == 2
    assert plan.programs["walk"].entry == ""  # a folder program
    # The nearest group's input_validator_args.
    assert group_args(plan, "secret/1-large/1-huge/09-a", "input_validator_args", "bounds")[-2:] == ["--min-n", "1000"]
    assert group_args(plan, "secret/05-zero", "input_validator_args", "bounds") == ["--max-n", "100000"]


@pytest.mark.parametrize(
    "data, words",
    [
        ("secret:\n  data:\n    a:\n      copy: ../../problem\n", "data.secret.data.a.copy"),
        ("secret:\n  data:\n    a: nosuch.py 1\n", "no generator 'nosuch.py' in generators/"),
        ("secret:\n  data:\n    a:\n      generate: g.py\n      count: 0\n", "count"),
        ("secret:\n  data:\n    a: g.py {seed} {seed:1}\n", "{seed} may appear at most once"),
        ("secret:\n  data:\n    ../up: g.py\n", "not a valid test case or group name"),
        ("secret:\n  include: [nothing]\n  data:\n    a: g.py\n", "'nothing' names no earlier test case"),
        ('secret:\n  data:\n    a:\n      ans: "1"\n', "makes no input"),
    ],
)
def test_a_malformed_generators_yaml_is_named(tmp_path, data, words):
    (tmp_path / "generators").mkdir()
    (tmp_path / "generators" / "g.py").write_text("print(1)\n")
    (tmp_path / "generators" / "generators.yaml").write_text("data:\n" + "\n".join("  " + x for x in data.split("\n")))
    with pytest.raises(SourceError) as caught:
        plan_generators(tmp_path)
    assert "generators.yaml" in str(caught.value) and words in str(caught.value), str(caught.value)


def test_a_package_shipping_its_generated_tests_is_read_as_shipped(tmp_path, monkeypatch):
    """Every test the file makes is in data/ already: no sandbox is started."""
    package = shutil.copytree(CORPUS / "kattis-bapc-legacy", tmp_path / "legacy")
    for name in ("manual", "big", "small"):
        (package / "data" / "secret").mkdir(parents=True, exist_ok=True)
        (package / "data" / "secret" / f"{name}.in").write_text("4\n")
        (package / "data" / "secret" / f"{name}.ans").write_text("16\n")
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))

    def started(*args, **kw):
        raise Started

    monkeypatch.setattr(judge_generate, "make_sandbox", started)
    assert judge_generate.generated_data(package, source_files(package), SandboxConfig()) is None
    (package / "data" / "secret" / "big.in").unlink()  # one missing: the file's tests are made
    with pytest.raises(Started):
        judge_generate.generated_data(package, source_files(package), SandboxConfig())


def test_include_files_go_beside_submissions_with_constants_filled():
    problem = load(CORPUS / "kattis-include")[0]
    files = problem.files
    assert files["private/include/python3/offset.py"] == b"SHIFT = 17\n"
    assert files["private/include/pypy3/offset.py"] == b"SHIFT = 17\n"
    assert files["private/include/cpp17/offset.h"] == b"const long long SHIFT = 17;\n"
    assert files["private/include/c11/README.txt"] == b"The shift is 17.\n"  # no include/c/: the default
    assert "private/include/cpp17/README.txt" not in files  # a language's own folder replaces the default
    assert files["workspace/include/python3/offset.py"] == b"SHIFT = 17\n"
    assert "## Included files" in problem.statement and "`include/cpp/offset.h`" in problem.statement
    assert problem.spec.time_limit_s == 3.0  # from .timelimit: problem.yaml sets none
    assert problem.time_multiplier is None


@pytest.mark.parametrize("text", ["fast\n", "0\n", "-1\n", "nan\n"])
def test_a_timelimit_file_without_a_positive_number_is_named(tmp_path, text):
    package = shutil.copytree(CORPUS / "kattis-include", tmp_path / "p")
    (package / ".timelimit").write_text(text)
    with pytest.raises(SourceError, match=r"\.timelimit: must hold the time limit in seconds"):
        load(package)


def test_domjudge_ini_timelimit_is_read_and_problem_yaml_wins(tmp_path):
    package = shutil.copytree(CORPUS / "kattis-include", tmp_path / "p")
    (package / ".timelimit").unlink()
    (package / "domjudge-problem.ini").write_text("name='Shifted'\ntimelimit = '2.5'\n")
    assert load(package)[0].spec.time_limit_s == 2.5
    meta = package / "problem.yaml"
    meta.write_text(meta.read_text() + "limits:\n  time_limit: 4\n")
    assert load(package)[0].spec.time_limit_s == 4.0


def test_generated_tests_do_not_enter_the_outside_files_of_the_build_key(tmp_path, monkeypatch):
    """Tests made in arex's cache are decided by the source's content: they are not hashed again
    as files from outside the source."""
    from arex.envs import judge_build

    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    made = tmp_path / "cache" / "generated" / "k" / "data" / "secret" / "1.in"
    made.parent.mkdir(parents=True)
    made.write_text("1\n")
    outside = tmp_path / "elsewhere.h"
    outside.write_text("x")
    problem = load(CORPUS / "kattis-include")[0]
    problem.files["private/tests/made.in"] = made
    problem.files["private/checker/elsewhere.h"] = outside
    assert judge_build._outside(problem, CORPUS / "kattis-include") == [outside]
    assert Path(made).is_file()


def test_includes_link_each_case_once_and_name_a_clash(tmp_path):
    """A group included with the cases it includes itself links each case once (BAPCtools resolves
    an include to the case it repeats); two different cases of one name in a folder are named.
    Groups are walked in name order (as BAPCtools): an include names an earlier one."""
    (tmp_path / "generators").mkdir()
    (tmp_path / "generators" / "g.py").write_text("print(1)\n")
    yaml_text = (
        "data:\n  sample:\n    data:\n      '1': {in: '1'}\n"
        "  secret:\n    data:\n"
        "      small:\n        include: ['1']\n        data:\n          a: g.py 1\n"
        "      z-all:\n        include: [small, sample]\n        data:\n          b: g.py 2\n"
    )
    (tmp_path / "generators" / "generators.yaml").write_text(yaml_text)
    plan = plan_generators(tmp_path)
    linked = {c.path: c.same_as for c in plan.cases if c.same_as}
    assert linked == {"secret/small/1": "sample/1", "secret/z-all/a": "secret/small/a", "secret/z-all/1": "sample/1"}
    clash = yaml_text.replace("a: g.py 1", "'1': g.py 1").replace("        include: ['1']\n", "")
    (tmp_path / "generators" / "generators.yaml").write_text(clash)
    with pytest.raises(SourceError, match="links two cases named '1' into data/secret/z-all"):
        plan_generators(tmp_path)


def test_a_test_cases_own_validator_args_replace_its_groups(tmp_path):
    (tmp_path / "generators").mkdir()
    (tmp_path / "generators" / "g.py").write_text("print(1)\n")
    (tmp_path / "generators" / "generators.yaml").write_text(
        "data:\n  secret:\n    test_group.yaml: {input_validator_args: [--group]}\n    data:\n"
        "      a: g.py 1\n      b:\n        generate: g.py 2\n"
        "        yaml: {input_validator_args: ['', 'g.py {seed}']}\n"
    )
    plan = plan_generators(tmp_path)
    a, b = plan.cases
    assert a.validator_args is None and group_args(plan, a.path, "input_validator_args", "v") == ["--group"]
    assert b.validator_args == ["", "g.py {seed}"]  # as written: a validator may check the seed with it
