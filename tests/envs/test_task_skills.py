"""Task-specific skills: an env's own `skills/`, shipped with its source (`arex-skills/`) or drafted
by the teacher (`build-envs --draft-skills`), each checked (format, no private data) before it is
kept; mounted read-only beside the general ones and listed in the catalogue as written for the task;
`rollout.general_skills` / `rollout.task_skills` turn each off. Real parts: the Docker build and
sandbox for the bundled judge problem, the scripted teacher over HTTP on 127.0.0.1; the loop
toggles on the `process` test backend with the tally kind of tests/loop_kit.py."""

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from loop_kit import TEACHER, climbing, rollout
from repo_paths import REPO
from typer.testing import CliRunner

from arex.cli import app
from arex.envs.build import build_envs
from arex.envs.runtime import load_env
from arex.envs.skills import SkillSet, check_task_skill, skill_set
from arex.envs.task_skills import PrivateData, keep, read_record, ship
from arex.hashing import json_sha256
from arex.record.trajectory import ToolCall, load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.rollout.tools import parse_tool_calls
from arex.sandbox import SandboxConfig
from arex.teacher.scripted import Reply, RoundScript, ScriptedServer, tool_call

ROOT = REPO
NOTE_BODY = "Pair sums: sort once, then two pointers; the sample in samples/ is the quick check."
SHIPPED = f"---\nname: pair-sums-notes\ndescription: How the author would attack pair sums.\n---\n{NOTE_BODY}\n"
TALLY_SKILL = (
    "---\nname: count-high\ndescription: The answer file takes numbers up to 10.\n---\nWrite 10 into answer.txt.\n"
)


pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


def skill(root: Path, name: str, text: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(text, encoding="utf-8")
    return root / name


# -- the rollout side: mount, catalogue, read_skill, the two switches (process backend) ----------
@pytest.fixture
def tally(tmp_path):
    root = tmp_path / "envs" / "tally"
    (root / "workspace").mkdir(parents=True)
    (root / "task.yaml").write_text("kind: tally\nid: tally\ntitle: Count up\n")
    (root / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt; higher is better.\n")
    (root / "workspace" / "answer.txt").write_text("1\n")
    skill(root / "skills", "count-high", TALLY_SKILL)
    return load_env(root)


def general(tmp_path) -> Path:
    folder = tmp_path / "general"
    skill(folder, "tidy-notes", "---\nname: tidy-notes\ndescription: Keep notes short.\n---\nOne line per round.\n")
    return folder


def reads(n: int) -> list[str]:
    return (
        ["cat task-skills/count-high/SKILL.md; cat skills/tidy-notes/SKILL.md", *climbing(n)] if n == 1 else climbing(n)
    )


@pytest.mark.parametrize(
    "general_on, task_on",
    [(True, True), (False, True), (True, False), (False, False)],
)
def test_each_switch_removes_its_skills_from_the_mount_and_the_catalogue(tally, tmp_path, general_on, task_on):
    config = RolloutConfig(
        rounds=1,
        skills_dir=str(general(tmp_path)),
        skills_target="skills",
        general_skills=general_on,
        task_skills=task_on,
    )
    _, [t], requests = rollout(tally, RoundScript(reads), tmp_path / "store", config)
    sent = json.dumps(requests[0])  # the request as the teacher's server received it
    shown = t.rounds[0].steps[0].observation
    assert ("Write 10 into answer.txt." in shown) == task_on and ("One line per round." in shown) == general_on
    assert ("- count-high: The answer file takes numbers up to 10." in sent) == task_on
    assert ("Written for this task, read-only at task-skills" in sent) == task_on
    assert ("- tidy-notes: Keep notes short." in sent) == general_on
    assert ("this run has no skills" in sent) == (not general_on and not task_on)
    targets = [
        m.target for m in load_env(tally.dir).sandbox_config(SandboxConfig(), *mount_args(config, tally)[0]).mounts
    ]
    assert targets == [x for x, on in (("skills", general_on), ("task-skills", task_on)) if on]


def mount_args(config: RolloutConfig, env) -> tuple:
    ss = skill_set(
        config.skills_path() if config.general_skills else None,
        env.dir if config.task_skills else None,
        config.skills_target,
    )
    return (ss.general_dir, ss.general_target, ss.task_dir, ss.task_target), ss


def test_read_skill_takes_task_skill_names_in_tools_mode(tally, tmp_path):
    def commands(n):
        return (
            [Reply(tool_calls=(tool_call("read_skill", {"name": "count-high"}),)), *climbing(n)]
            if n == 1
            else climbing(n)
        )

    config = RolloutConfig(rounds=1, action_format="tools", skills_dir=str(general(tmp_path)), skills_target="skills")
    _, [t], requests = rollout(tally, RoundScript(commands), tmp_path / "store", config)
    enum = t.header.tools[2]["function"]["parameters"]["properties"]["name"]["enum"]
    assert enum == ["tidy-notes", "count-high"] and all(r["tools"] == t.header.tools for r in requests)
    first = t.rounds[0].steps[0]
    assert (
        first.action.command == "cat task-skills/count-high/SKILL.md"
        and "Write 10 into answer.txt." in first.tool_results[0]
    )


def test_a_task_skill_named_like_a_general_one_is_offered_apart(tmp_path):
    same = skill(tmp_path / "g", "tidy-notes", "---\nname: tidy-notes\ndescription: General.\n---\nG.\n")
    skill(tmp_path / "env" / "skills", "tidy-notes", "---\nname: tidy-notes\ndescription: For this task.\n---\nT.\n")
    ss = skill_set(same.parent, tmp_path / "env", "/skills")
    assert ss.paths() == {
        "tidy-notes": "/skills/tidy-notes/SKILL.md",
        "task/tidy-notes": "/task-skills/tidy-notes/SKILL.md",
    }
    call = ToolCall.model_validate(tool_call("read_skill", {"name": "task/tidy-notes"}, id="c1"))
    assert parse_tool_calls([call], "/skills", ss.paths()).command == "cat /task-skills/tidy-notes/SKILL.md"
    assert SkillSet().catalogue().startswith("(none")


def test_the_env_hash_covers_its_skills(tally):
    before = tally.spec_hash
    assert before != json_sha256({"kind": "tally", "id": "tally", "title": "Count up"}, sort_keys=True)[:16]
    (tally.dir / "skills" / "count-high" / "SKILL.md").write_text(TALLY_SKILL + "More.\n")
    assert load_env(tally.dir).spec_hash != before
    shutil.rmtree(tally.dir / "skills")
    assert (
        load_env(tally.dir).spec_hash
        == json_sha256({"kind": "tally", "id": "tally", "title": "Count up"}, sort_keys=True)[:16]
    )


# -- the checks: format and private data (hand-made env folders) ---------------------------------
HIDDEN_LINE = "917 3 55 1024 77 5 88 613 42 9001 4 18"


@pytest.fixture
def judge_env(tmp_path):
    root = tmp_path / "judge"
    (root / "private" / "tests").mkdir(parents=True)
    (root / "private" / "canary.txt").write_text("arex-canary-0123456789abcdef0123456789abcdef\n")
    (root / "private" / "tests" / "sample-1.in").write_text("3\n1 2 3 4 5 6 7 8 9 10 11 12\n")
    (root / "private" / "tests" / "sample-1.ans").write_text("6\n")
    (root / "private" / "tests" / "main-1.in").write_text(f"12\n{HIDDEN_LINE}\n")
    (root / "private" / "tests" / "main-1.ans").write_text("the answer is 1000003 ok\n")
    (root / "statement.md").write_text("Sum the numbers. Example: 1 2 3 4 5 6 7 8 9 10 11 12 gives 78.\n")
    tests = [{"name": "sample-1", "input": "tests/sample-1.in", "answer": "tests/sample-1.ans", "sample": True},
             {"name": "main-1", "input": "tests/main-1.in", "answer": "tests/main-1.ans"}]  # fmt: skip
    (root / "task.yaml").write_text(json.dumps({"id": "judge", "title": "Sums", "tests": tests}))
    return root


def test_a_skill_with_the_canary_or_hidden_test_content_is_rejected_and_not_written(judge_env, tmp_path):
    private = PrivateData(judge_env)
    clean = skill(
        tmp_path / "in",
        "sum-tips",
        "---\nname: sum-tips\ndescription: Use 64-bit sums.\n---\nThe sample 1 2 3 4 5 6 7 8 9 10 11 12 gives 78.\n",
    )
    canary = skill(
        tmp_path / "in",
        "leaky",
        "---\nname: leaky\ndescription: d\n---\nremember arex-canary-0123456789abcdef0123456789abcdef\n",
    )
    hidden = skill(
        tmp_path / "in", "peek", f"---\nname: peek\ndescription: d\n---\nTry:\n    {HIDDEN_LINE.replace(' ', '  ')}\n"
    )
    answer = skill(
        tmp_path / "in", "answers", "---\nname: answers\ndescription: d\n---\nExpect: the answer is 1000003 ok.\n"
    )
    notes = {f.name: keep(f, judge_env, "drafted", private) for f in (clean, canary, hidden, answer)}
    assert notes["sum-tips"].status == "kept" and (judge_env / "skills" / "sum-tips" / "SKILL.md").is_file()
    assert notes["leaky"].status == "rejected" and "canary" in notes["leaky"].reason
    assert notes["peek"].status == "rejected" and "hidden test main-1 (input file)" in notes["peek"].reason
    assert notes["answers"].status == "rejected" and "hidden test main-1 (answer file)" in notes["answers"].reason
    assert sorted(p.name for p in (judge_env / "skills").iterdir()) == ["sum-tips"]


def test_ml_private_labels_rows_and_runs_are_rejected(tmp_path):
    root = tmp_path / "ml"
    (root / "private").mkdir(parents=True)
    (root / "task.yaml").write_text("kind: ml\nid: ml\n")
    rows = [("r-0001", "0.5", "public")] + [(f"r-{i:04d}", str(i % 3 + 0.25), "private") for i in range(2, 14)]
    (root / "private" / "labels.csv").write_text("id,y,split\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    private = PrivateData(root)
    assert private.find("Row r-0005 has y 2.25 in the data.") is None  # its id and label, but not side by side
    assert "row of id 'r-0005'" in private.find("r-0005,2.25")
    run = " ".join(str(i % 3 + 0.25) for i in range(4, 12))
    assert "private label values" in private.find(f"labels: {run}")
    assert private.find("labels: 0.25 1.25 2.25 0.25") is None  # shorter than a run


def test_the_format_is_checked(tmp_path):
    with pytest.raises(Exception, match="must equal the folder name"):
        check_task_skill(skill(tmp_path, "a-b", "---\nname: other\ndescription: d\n---\nbody\n"))
    with pytest.raises(Exception, match="lowercase"):
        check_task_skill(skill(tmp_path, "Bad_Name", "---\nname: Bad_Name\ndescription: d\n---\nbody\n"))
    with pytest.raises(Exception, match="byte cap"):
        check_task_skill(skill(tmp_path, "big", "---\nname: big\ndescription: d\n---\n" + "x" * 20000 + "\n"))
    with pytest.raises(Exception, match="body is empty"):
        check_task_skill(skill(tmp_path, "empty", "---\nname: empty\ndescription: d\n---\n\n"))


def test_a_shipped_skill_leaking_private_data_is_reported(judge_env, tmp_path):
    source = tmp_path / "source"
    skill(source / "arex-skills", "peek", f"---\nname: peek\ndescription: d\n---\n{HIDDEN_LINE}\n")
    skill(source / "arex-skills", "ok-tips", "---\nname: ok-tips\ndescription: d\n---\nSort first.\n")
    notes = ship(source, judge_env)
    assert [(n.name, n.status) for n in notes] == [("ok-tips", "kept"), ("peek", "rejected")]
    assert [n.name for n in read_record(judge_env)] == ["ok-tips", "peek"] and not (
        judge_env / "skills" / "peek"
    ).exists()


# -- the real thing: build, Docker sandbox, --draft-skills (Docker) ------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    source = tmp_path_factory.mktemp("src") / "judge-pair-sums"
    shutil.copytree(ROOT / "envs" / "judge-pair-sums", source)
    skill(source / "arex-skills", "pair-sums-notes", SHIPPED)
    out = tmp_path_factory.mktemp("built")
    [report] = build_envs([source], out)
    assert report.status == "accepted", report.reason
    return source, out, report


@pytest.mark.docker
def test_a_shipped_skill_is_in_the_env_the_docker_sandbox_and_the_catalogue(built, tmp_path):
    source, out, report = built
    assert (out / "pair-sums" / "skills" / "pair-sums-notes" / "SKILL.md").read_text() == SHIPPED
    assert [(n.name, n.origin, n.status) for n in report.skills] == [("pair-sums-notes", "shipped", "kept")]
    assert any(g.name == "task skills" and g.passed for g in report.gates)
    assert "pair-sums-notes" in json.dumps(json.loads((out / "build-report.json").read_text())["envs"][0]["skills"])
    env = load_env(out / "pair-sums")

    def commands(n):
        return ["cat /task-skills/pair-sums-notes/SKILL.md && touch /task-skills/x", "ls /skills | grep -c ."]

    config = RolloutConfig(rounds=1)
    with ScriptedServer(RoundScript(commands), model="scripted-teacher") as server:
        asyncio.run(run_batch([env], TEACHER, config, SandboxConfig(), tmp_path / "store", 1, 1, server.base_url))
        sent = json.dumps(server.requests[0])
    [t] = [load(p) for p in (tmp_path / "store" / env.id).glob("*.jsonl")]
    steps = t.rounds[0].steps
    assert NOTE_BODY in steps[0].observation and "Read-only file system" in steps[0].observation
    assert int(steps[1].observation.split()[-1]) >= 8  # the general skills are mounted too
    assert (
        "Written for this task, read-only at /task-skills" in sent
        and "- pair-sums-notes: How the author would attack pair sums." in sent
    )


def drafting_teacher(bodies: dict[str, str]):
    """Answers a skill request with a SKILL.md for the name it asks for (fenced, as models do)."""

    def answer(request: dict, index: int) -> str:
        name = request["messages"][-1]["content"].split("Name: ", 1)[1].split("\n", 1)[0].strip()
        return f"```markdown\n---\nname: {name}\ndescription: Written for pair sums ({name}).\n---\n{bodies[name]}\n```"

    return answer


def draft_cli(source: Path, out: Path, server: ScriptedServer):
    overrides = [
        f"teacher.base_url={server.base_url}",
        "teacher.model=scripted-teacher",
        "teacher.track_cost=false",
        "teacher.max_attempts=1",
    ]
    return CliRunner().invoke(
        app,
        ["build-envs", str(source), "--out", str(out), "--draft-skills", *[x for o in overrides for x in ("-c", o)]],
    )


@pytest.mark.docker
def test_draft_skills_writes_checked_skills_and_does_not_redraft(built, tmp_path):
    source, out, _ = built
    mine = tmp_path / "envs"
    shutil.copytree(out, mine)  # the env is unchanged: skipped, then drafted
    bodies = {
        "pair-sums-approach": "Sort, then two pointers: O(n log n).",
        "pair-sums-local-testing": "Run `g++ -O2 solution.cpp && ./a.out < samples/1.in`.",
    }
    with ScriptedServer(drafting_teacher(bodies), model="scripted-teacher") as server:
        result = draft_cli(source, mine, server)
        asked = [r["messages"][-1]["content"] for r in server.requests]
    assert result.exit_code == 0, result.output
    # file list and gates
    assert len(asked) == 2 and all("solution.cpp" in a and "no-op scores clearly lower" in a for a in asked)
    for name, body in bodies.items():
        assert (mine / "pair-sums" / "skills" / name / "SKILL.md").read_text().endswith(body + "\n")
    env = load_env(mine / "pair-sums")
    _, ss = mount_args(RolloutConfig(), env)
    assert [s.name for s in ss.task] == ["pair-sums-approach", "pair-sums-local-testing", "pair-sums-notes"]
    reported = json.loads((mine / "build-report.json").read_text())["envs"][0]["skills"]
    assert [(s["name"], s["origin"], s["status"]) for s in reported][1:] == [
        ("pair-sums-approach", "drafted", "kept"),
        ("pair-sums-local-testing", "drafted", "kept"),
    ]
    with ScriptedServer(drafting_teacher(bodies), model="scripted-teacher") as server:
        again = draft_cli(source, mine, server)
        assert server.stats["requests"] == 0 and again.exit_code == 0
    assert "not drafted again" in again.output


@pytest.mark.docker
def test_a_drafted_skill_with_the_canary_or_a_hidden_test_is_rejected_with_the_reason(built, tmp_path):
    source, out, _ = built
    mine = tmp_path / "envs"
    shutil.copytree(out, mine)
    canary = (mine / "pair-sums" / "private" / "canary.txt").read_text().strip()
    hidden = (mine / "pair-sums" / "private" / "tests" / "small-01.in").read_text().splitlines()[1]
    bodies = {"pair-sums-approach": f"Marker: {canary}", "pair-sums-local-testing": f"A test input:\n\n    {hidden}"}
    with ScriptedServer(drafting_teacher(bodies), model="scripted-teacher") as server:
        result = draft_cli(source, mine, server)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (mine / "pair-sums" / "skills").iterdir()) == ["pair-sums-notes"]  # neither written
    notes = {n.name: n for n in read_record(mine / "pair-sums") if n.origin == "drafted"}
    assert notes["pair-sums-approach"].status == "rejected" and "canary" in notes["pair-sums-approach"].reason
    assert (
        notes["pair-sums-local-testing"].status == "rejected"
        and "hidden test small-01 (input file)" in notes["pair-sums-local-testing"].reason
    )
    table = (mine / "build-report.md").read_text()
    assert "## Task skills" in table and "canary" in table and "hidden test small-01" in table
    assert "skill pair-sums-approach rejected: it contains the env's canary string" in " ".join(result.output.split())


def test_the_switches_key_rollouts_apart():
    from arex.rollout.batch import config_hash

    default = config_hash(TEACHER, RolloutConfig())
    assert (
        len(
            {
                default,
                config_hash(TEACHER, RolloutConfig(general_skills=False)),
                config_hash(TEACHER, RolloutConfig(task_skills=False)),
            }
        )
        == 3
    )
