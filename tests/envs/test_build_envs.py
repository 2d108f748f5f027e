"""`arex build-envs` on every judge source format, with broken sources rejected for the right reason."""

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from repo_paths import REPO
from typer.testing import CliRunner

from arex.cli import app
from arex.envs.build import build_envs, load_spec
from arex.envs.judge_sources import SourceError, load

ADD_PY = "a, b = map(int, input().split())\nprint(a + b)\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def kattis_package(root: Path) -> Path:
    files = {
        "problem.yaml": "name: Add Them\nvalidation: custom\nlimits:\n  time_multiplier: 5\n  memory: 128\n",
        "problem_statement/problem.en.tex": "\\problemname{Add Them}\nAdd two integers.\n",
        "output_validators/checker/validate.py": """
            import sys
            answer = open(sys.argv[2]).read().split()
            team = sys.stdin.read().split()
            if team == answer:
                sys.exit(42)
            open(sys.argv[3] + "judgemessage.txt", "w").write(f"expected {answer} got {team}")
            sys.exit(43)
            """,
        "submissions/accepted/add.py": ADD_PY,
        "submissions/wrong_answer/sub.py": "a, b = map(int, input().split())\nprint(a - b)\n",
        "submissions/time_limit_exceeded/slow.py": "import time\ntime.sleep(30)\n",
    }
    cases = {
        "sample/1": (1, 1),
        "secret/g1/1": (2, 3),
        "secret/g1/2": (0, 0),
        "secret/g2/1": (10**6, 7),
        "secret/g2/2": (-5, 2),
    }
    for name, (a, b) in cases.items():
        files[f"data/{name}.in"] = f"{a} {b}\n"
        files[f"data/{name}.ans"] = f"{a + b}\n"
    return write(root, files)


def frontier_problem(root: Path) -> Path:
    files = {
        "statement.txt": "# Big Number\nPrint an integer x with 0 <= x <= N. Score: x / N.\n",
        "config.yaml": (
            "type: default\nchecker: chk.cc\nchecker_type: testlib\ntime: 1s\nmemory: 256m\n"
            "subtasks:\n  - score: 100\n    n_cases: 3\n"
        ),
        "chk.cc": """
            #include <cstdio>
            int main(int argc, char** argv) {  // chk input output answer
                FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "r");
                long long n, x;
                if (fscanf(in, "%lld", &n) != 1) return 3;
                if (fscanf(out, "%lld", &x) != 1 || x < 0 || x > n) { fprintf(stderr, "wrong answer: bad x\\n"); return 1; }
                double r = (double)x / n;
                fprintf(stderr, "points %.4f Value: %lld. Ratio: %.4f, RatioUnbounded: %.4f\\n", r, x, r, r);
                return r >= 1.0 ? 0 : 7;
            }
            """,  # noqa: E501
        "solutions/best.py": "print(int(input()))\n",
        "solutions/partial_half.py": "print(int(input()) // 2)\n",
    }
    for i, n in enumerate((10, 1000, 77), start=1):
        files[f"testdata/{i}.in"] = f"{n}\n"
        files[f"testdata/{i}.ans"] = f"{n}\n"
    return write(root, files)


def codecontests_rows(path: Path) -> Path:
    row = {
        "name": "1000_A. Add",
        "description": "Given a and b, print a + b.",
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n", "100 -1\n"], "output": ["10\n", "99\n"]},
        "generated_tests": {"input": ["0 0\n"], "output": ["0\n"]},
        "solutions": {
            "language": [3, 2],
            "solution": [ADD_PY, '#include <cstdio>\nint main(){int a,b;scanf("%d%d",&a,&b);printf("%d\\n",a+b);}'],
        },
        "incorrect_solutions": {"language": [3], "solution": ["print(0)\n"]},
        "time_limit": {"seconds": 1, "nanos": 0},
        "memory_limit_bytes": 256 * 1024 * 1024,
    }
    path.write_text(json.dumps([row]))
    return path


def own_problem(root: Path, wrong_reference: bool = False, drop_answer: bool = False) -> Path:
    files = {
        "task.yaml": (
            "id: {}\ntitle: Add\ntime_limit_s: 1.0\nsolutions:\n  - {{path: solutions/ref.py, expected: accepted}}\n"
        ).format(root.name),
        "statement.md": "Add two integers.\n",
        "solutions/ref.py": "print(0)\n" if wrong_reference else ADD_PY,
    }
    for name, (a, b) in {"sample-1": (1, 2), "main-1": (3, 4), "main-2": (5, 6)}.items():
        files[f"private/tests/{name}.in"] = f"{a} {b}\n"
        if not (drop_answer and name == "main-2"):
            files[f"private/tests/{name}.ans"] = f"{a + b}\n"
    return write(root, files)


def test_loaders_read_each_format(tmp_path):
    kattis = load(kattis_package(tmp_path / "kattis-add"))[0]
    assert kattis.spec.checker.kind == "kattis" and kattis.time_multiplier == 5.0
    assert sorted({t.group for t in kattis.spec.tests}) == ["g1", "g2", "sample"]
    assert {s.expected for s in kattis.spec.solutions} == {"accepted", "wrong_answer", "time_limit_exceeded"}
    frontier = load(frontier_problem(tmp_path / "fcs-big"))[0]
    assert (frontier.spec.scoring, frontier.spec.time_limit_s, frontier.spec.memory_mb) == ("ratio", 1.0, 256)
    rows = load(codecontests_rows(tmp_path / "cc.json"))
    assert rows[0].spec.id == "cc-1000-a-add" and len(rows[0].spec.tests) == 4
    assert [t.sample for t in rows[0].spec.tests].count(True) == 1


def test_unreadable_sources_name_file_and_field(tmp_path):
    with pytest.raises(SourceError, match=r"main-2\.in.*no answer file"):
        load(own_problem(tmp_path / "no-answer", drop_answer=True))
    broken = frontier_problem(tmp_path / "fcs-broken")
    (broken / "config.yaml").write_text("type: default\nmemory: 256m\nsubtasks: [{score: 100, n_cases: 3}]\n")
    with pytest.raises(SourceError, match=r"config\.yaml: field 'time' is missing"):
        load(broken)
    (broken / "config.yaml").write_text(
        "type: default\ntime: soon\nmemory: 256m\nsubtasks: [{score: 100, n_cases: 3}]\n"
    )
    with pytest.raises(SourceError, match=r"field 'time': cannot read a time from 'soon'"):
        load(broken)
    bad_rows = tmp_path / "bad.jsonl"
    bad_rows.write_text('{"name": "x", "description": "d", "public_tests": {"input": ["1"], "output": []}}\n')
    with pytest.raises(SourceError, match=r"bad\.jsonl line 1: field 'public_tests': 1 inputs but 0 outputs"):
        load(bad_rows)


@pytest.mark.docker
def test_build_envs_end_to_end(tmp_path):
    sources = [
        kattis_package(tmp_path / "src" / "kattis-add"),
        frontier_problem(tmp_path / "src" / "fcs-big"),
        codecontests_rows(tmp_path / "src" / "rows.json"),
        own_problem(tmp_path / "src" / "wrong-ref", wrong_reference=True),
        own_problem(tmp_path / "src" / "no-answer", drop_answer=True),
        write(tmp_path / "src" / "not-a-problem", {"README.txt": "hello"}),
    ]
    out = tmp_path / "envs"
    reports = {r.env_id or Path(r.source).name: r for r in build_envs(sources, out, concurrency=2)}
    assert {k: r.status for k, r in reports.items()} == {
        "kattis-add": "accepted",
        "frontier-fcs-big": "accepted",
        "cc-1000-a-add": "accepted",
        "wrong-ref": "rejected",
        "no-answer": "rejected",
        "not-a-problem": "rejected",
    }, {k: r.reason for k, r in reports.items()}
    assert "accepted scores 1.0" in reports["wrong-ref"].reason
    assert "no answer file" in reports["no-answer"].reason
    assert "not a problem source" in reports["not-a-problem"].reason
    # Legacy Kattis: the time limit was derived from the accepted submission.
    assert any(g.name == "time limit derived" for g in reports["kattis-add"].gates)
    assert load_spec(out / "kattis-add").time_limit_s == 1.0
    # Frontier-CS: graded by the checker's ratio; the partial solution lands in between.
    partial = reports["frontier-fcs-big"].scores["partially_accepted:solutions/partial_half.py"]
    assert 0.45 < partial < 0.55
    # The env folder: resolved spec, statement, starter, private data.
    env = out / "cc-1000-a-add"
    assert (env / "task.yaml").is_file() and (env / "statement.md").read_text().startswith("Given a and b")
    assert (env / "workspace" / "solution.cpp").is_file() and len(list((env / "private" / "tests").iterdir())) == 8
    report = json.loads((out / "build-report.json").read_text())
    assert report["summary"] == {"accepted": 3, "skipped": 0, "rejected": 3, "error": 0}
    assert "| wrong-ref |" in (out / "build-report.md").read_text()
    # Re-running skips what is unchanged; a changed source is rebuilt.
    again = {r.env_id: r.status for r in build_envs(sources[:3], out)}
    assert set(again.values()) == {"skipped"}
    (sources[0] / "data" / "secret" / "g2" / "3.in").write_text("1 1\n")
    (sources[0] / "data" / "secret" / "g2" / "3.ans").write_text("2\n")
    assert {r.env_id: r.status for r in build_envs(sources[:1], out)} == {"kattis-add": "accepted"}


@pytest.mark.docker
def test_cli_builds_bundled_envs(tmp_path):
    root = REPO / "envs"
    result = CliRunner().invoke(app, ["build-envs", str(root / "judge-subset-fill"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    built = yaml.safe_load((tmp_path / "subset-fill" / "task.yaml").read_text())
    assert built["scoring"] == "ratio" and built["source_hash"]
    scores = json.loads((tmp_path / "subset-fill" / ".build.json").read_text())["scores"]
    assert scores["accepted:solutions/exact_dp.cpp"] == 1.0 and scores["noop"] == 0.0
    assert 0.0 < scores["starter"] < 1.0  # the greedy starter leaves room to improve
