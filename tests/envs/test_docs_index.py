"""The offline documentation layer: the `docs` command and its index in the judge agent's image and
in ML env images, used from real sandboxes with no network; the layer is cached by content hash;
the system prompt mentions the command only when rollout.docs is on."""

import asyncio
from pathlib import Path

import docker
import pytest
from repo_paths import TESTS

from arex.envs import docs_index, runtime
from arex.envs.docs_index import agent_image, docs_image, docs_tag
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.ml_images import deps_image, env_image
from arex.envs.runtime import Env, Grading, load_env
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig, make_sandbox
from arex.sandbox.base import BACKENDS
from arex.specs import GradeResult, MLSpec
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

FIXTURE_ENVS = TESTS / "fixtures" / "v1" / "envs"


def run(box, command: str) -> tuple[int, str]:
    result = box.exec(command, timeout=60)
    return result.exit_code, result.stdout + result.stderr


def assert_offline(box) -> None:
    """The sandbox has only loopback, and a connection out fails."""
    code, out = run(box, "ls /sys/class/net")
    assert code == 0 and out.split() == ["lo"], out
    probe = "import socket; s = socket.socket(); s.settimeout(3); s.connect(('192.0.2.1', 80))"
    code, out = run(box, f'python3 -c "{probe}"')
    assert code != 0 and ("unreachable" in out or "OSError" in out), out


@pytest.fixture(scope="module")
def agent_tag() -> str:
    return agent_image(SandboxConfig())


@pytest.mark.docker
def test_judge_agent_sandbox_reads_stdlib_docs_offline(agent_tag):
    env = load_env(FIXTURE_ENVS / "subset-fill")
    config = env.sandbox_config(SandboxConfig())
    assert config.image == agent_tag and agent_tag.startswith("arex-agent-docs:")
    box = make_sandbox(config, "docs-judge")
    box.start()
    try:
        assert_offline(box)
        code, out = run(box, "docs search bisect_left")
        assert code == 0 and out.splitlines()[1].startswith("bisect.bisect_left  [function]"), out
        code, out = run(box, "docs read bisect.bisect_left")
        assert (
            code == 0
            and "bisect_left(a, x, lo=0, hi=None, *, key=None)" in out
            and "Return the index where to insert item x" in out
        ), out
        code, out = run(box, "docs read collections")
        assert code == 0 and "Members (" in out and "Counter  [class]" in out, out
        code, out = run(box, "docs read bisect.no_such_function")
        assert (
            code == 1
            and out.count("\n") == 1
            and out.startswith("No page named 'bisect.no_such_function'")
            and out.rstrip().endswith(".")
        ), out
        code, out = run(box, "docs")
        assert code == 0 and "docs search QUERY" in out and "docs read NAME" in out
        code, out = run(box, "docs read json")  # a long page is cut to fit an observation, with the way on
        assert len(out) < 3100 and "`docs read json --page 2`" in out, out
        code, out = run(box, "echo x >> /opt/arex/docs/index.sqlite")
        # the index cannot be changed from the sandbox
        assert code != 0 and ("Read-only" in out or "Permission denied" in out)
    finally:
        box.stop()


@pytest.mark.docker
def test_docs_layer_is_cached_by_content_hash(agent_tag, monkeypatch):
    client = docker.from_env()
    first = client.images.get(agent_tag).id
    monkeypatch.setattr(docs_index, "_known", {})  # a new process: only the engine's images remain

    def no_build(*args, **kwargs):
        raise AssertionError("the docs layer was built again")

    monkeypatch.setattr(docs_index, "_build", no_build)
    assert agent_image(SandboxConfig()) == agent_tag and client.images.get(agent_tag).id == first
    assert docs_tag("arex-base:latest", repo="arex-agent-docs") == agent_tag
    # what is excluded is part of the key
    assert docs_tag("arex-base:latest", ("json/__init__.py",), repo="arex-agent-docs") != agent_tag


@pytest.mark.docker
def test_excluded_files_never_reach_the_index(agent_tag):
    tag = docs_image("arex-base:latest", ("json/__init__.py",))
    box = make_sandbox(SandboxConfig(image=tag), "docs-exclude")
    box.start()
    try:
        assert run(box, "docs read json.dumps")[0] == 1
        code, out = run(
            box,
            (
                "python3 -c \"import sqlite3; print(sqlite3.connect('/opt/arex/docs/index.sqlite')"
                '.execute(\\"select count(*) from pages where name like \'json.%\'\\").fetchone()[0])"'
            ),
        )
        assert code == 0 and out.strip() == "0", out
        assert run(box, "docs read bisect.bisect_left")[0] == 0
    finally:
        box.stop()


@pytest.mark.docker
def test_ml_env_image_documents_its_installed_packages(tmp_path):
    raw = {"id": "docs-probe", "title": "t", "run": "python3 train.py",
           "metric": {"name": "rmse", "direction": "minimize"},
           "data": {"table": "t.csv", "target": "y"}, "requirements": ["tomli==2.0.1"]}  # fmt: skip
    spec = MLSpec.model_validate(raw)
    deps = deps_image(spec, tmp_path, SandboxConfig().image)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "train.py").write_text("print('hi')\n")
    tag = env_image(spec, deps, tmp_path / "workspace", docs_tag(deps).split(":")[1])
    box = make_sandbox(SandboxConfig(image=tag, seed=IMAGE_WORKSPACE), "docs-ml")
    box.start()
    try:
        assert_offline(box)
        code, out = run(box, "docs search tomli loads")
        assert code == 0 and "tomli.loads  [function]" in out, out
        code, out = run(box, "docs read tomli.loads")
        assert code == 0 and "loads(__s" in out and "Parse TOML from a string" in out, out
        code, out = run(box, "docs list")
        assert code == 0 and "tomli (" in out and "python (" in out, out
        assert run(box, "python3 train.py") == (0, "hi\n")  # the env's workspace, on top of the docs layer
    finally:
        box.stop()


# -- the system prompt ---------------------------------------------------------------------------
class NoteEnv(Env):
    """A whole env kind for the prompt check: the score is 1 if note.txt exists."""

    kind = "note"
    spec_model = None  # set below
    submission_path = "note.txt"

    def _baseline(self, scores):
        return 0.0

    def _grade(self, data, text, grading: Grading, log) -> GradeResult:
        return GradeResult(public_score=1.0, held_out_score=1.0, held_out_raw=1.0, feedback="ok")

    def _not_graded(self, problem, log) -> GradeResult:
        return GradeResult(public_score=0.0, held_out_score=0.0, held_out_raw=0.0, feedback=problem)

    def regrade(self, archive, end, base):
        raise NotImplementedError


def _system_prompt(tmp_path: Path, monkeypatch, docs: bool) -> str:
    from pydantic import BaseModel

    class NoteSpec(BaseModel):
        kind: str = "note"
        id: str
        title: str
        domain: str = "test"

    monkeypatch.setattr(NoteEnv, "spec_model", NoteSpec)
    monkeypatch.setitem(runtime.KINDS, "note", NoteEnv)
    monkeypatch.setitem(BACKENDS, "process", "process_sandbox:ProcessSandbox")
    root = tmp_path / f"env-{docs}"
    (root / "workspace").mkdir(parents=True)
    (root / "task.yaml").write_text("kind: note\nid: note\ntitle: Note\n")
    (root / "statement.md").write_text("Write note.txt.\n")
    env = load_env(root)
    teacher = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)
    with ScriptedServer(RoundScript(lambda n: ["echo hi > note.txt"]), model="scripted-teacher") as server:
        asyncio.run(
            run_batch(
                [env],
                teacher,
                RolloutConfig(rounds=1, docs=docs),
                SandboxConfig(backend="process"),
                tmp_path / f"store-{docs}",
                1,
                1,
                server.base_url,
            )
        )
        return server.requests[0]["messages"][0]["content"]


def test_system_prompt_mentions_docs_only_when_on(tmp_path, monkeypatch):
    on, off = _system_prompt(tmp_path, monkeypatch, True), _system_prompt(tmp_path, monkeypatch, False)
    assert "`docs search WORDS`" in on and "`docs read NAME`" in on
    assert "docs search" not in off and "docs read" not in off
    # the same prompt otherwise
    assert on.replace("\n" + RolloutConfig().load_prompts()["docs"].strip() + "\n", "") == off
