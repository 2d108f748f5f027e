"""arex as a user gets it: a wheel built from the checkout, `pip install`ed (not editable) into a
fresh venv, then `arex build-envs` and `arex rollout` with a scripted teacher, run from a folder
outside the checkout. The prompts, the skills and the sandbox runtime (runner.c, box/*.py) must come
from the installed package, never from the checkout.

The venv sees the system site-packages, so the dependencies need no download; the wheel is installed
with --ignore-installed, so the editable install of the checkout there cannot shadow it (asserted).
AREX_CACHE is a fresh folder: the sandbox runner is compiled from the wheel's runner.c.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import docker
import pytest
import yaml
from solutions import EXACT_PY

from arex.sandbox.docker import OWNER_LABEL
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
# What a fresh clone would not have. The copy matters: pip builds in the source tree (build/, *.egg-info).
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".arex", ".pytest_cache", ".ruff_cache", "demo"
)
TEACHER = ["-c", "teacher.model=scripted-teacher", "-c", "teacher.track_cost=false", "-c", "teacher.max_attempts=2"]
# Run by the venv's python, outside the checkout: where arex and its data resolve from.
PROBE = textwrap.dedent(
    """
    import importlib.metadata as md, json
    from packaging.requirements import Requirement
    import arex
    from arex.rollout.config import RolloutConfig
    from arex.sandbox.runtime import source_hash

    dist, config, unmet = md.distribution("arex"), RolloutConfig(), []
    for req in map(Requirement, dist.requires or []):
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            try:
                have = md.version(req.name)
            except md.PackageNotFoundError:
                have = None
            if have is None or not req.specifier.contains(have, prereleases=True):
                unmet.append(f"{req} (have {have})")
    print(json.dumps({
        "arex": arex.__file__, "dist": str(dist.locate_file("")), "direct_url": dist.read_text("direct_url.json"),
        "skills": str(config.skills_path().resolve()), "prompts": len(config.load_prompts()),
        "runtime": source_hash(), "unmet": unmet,
    }))
    """
)


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in cmd], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=NOT_IN_A_CLONE)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            base / "dist",
            src,
        ],
        cwd=base,
    )
    [built] = (base / "dist").glob("arex-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("install")
    assert not base.is_relative_to(ROOT)
    _run([sys.executable, "-m", "venv", "--system-site-packages", base / "venv"], cwd=base)
    python = base / "venv" / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", "--no-index", wheel], cwd=base)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "AREX_CACHE")}
    env.update(AREX_CACHE=str(base / "cache"), PATH=f"{base / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    probe = _run([python, "-c", PROBE], cwd=base, env=env)
    info = json.loads(probe.stdout)
    return {
        "base": base,
        "python": python,
        "arex": base / "venv" / "bin" / "arex",
        "env": env,
        "info": info,
        "site": Path(info["arex"]).parent.parent,
    }


@pytest.fixture(scope="module")
def built(venv) -> Path:
    """The bundled judge env, copied out of the checkout and built by the installed arex."""
    work = venv["base"] / "work"
    shutil.copytree(ROOT / "envs" / "judge-subset-fill", work / "judge-subset-fill")
    _run([venv["arex"], "build-envs", "judge-subset-fill", "--out", "built"], cwd=work, env=venv["env"])
    report = json.loads((work / "built" / "build-report.json").read_text())
    assert report["summary"]["accepted"] == 1, report
    assert str(ROOT) not in (work / "built" / "build-report.json").read_text()
    return work / "built"


class Teacher:
    """A RoundScript that notes the host folders mounted into the sandboxes of the rollout process,
    on each call until the rollout's sandbox is among them (it starts while the first call is out;
    by the second, its first command has run in it)."""

    def __init__(self, commands):
        self.script = RoundScript(commands)
        self.owner: int | None = None
        self.mounts: list[dict[str, str]] | None = None
        self.errors: list[str] = []

    def __call__(self, request: dict, index: int):
        if not any("/skills" in m for m in self.mounts or []) and self.owner is not None:
            try:
                client = docker.from_env()
                found = client.containers.list(filters={"label": f"{OWNER_LABEL}={self.owner}"})
                self.mounts = [{m["Destination"]: m["Source"] for m in c.attrs["Mounts"]} for c in found]
            except Exception as exc:  # noqa: BLE001 - reported by the test, not swallowed
                self.errors.append(repr(exc))
        return self.script(request, index)


def rollout(
    venv, built: Path, teacher: Teacher, out: str, rounds: int, *extra: str
) -> tuple[list[dict], list[dict], dict]:
    """`arex rollout` with the installed CLI, cwd outside the checkout; returns (record lines, requests,
    sandbox mounts)."""
    work = built.parent
    with ScriptedServer(teacher, model="scripted-teacher") as server:
        cmd = [
            venv["arex"],
            "rollout",
            "--envs",
            built,
            "--out",
            out,
            "--rounds",
            str(rounds),
            "--concurrency",
            "1",
            "-c",
            f"teacher.base_url={server.base_url}",
            *TEACHER,
            *extra,
        ]
        proc = subprocess.Popen(
            [str(c) for c in cmd], cwd=work, env=venv["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        teacher.owner = proc.pid
        try:
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        requests = list(server.requests)
    assert proc.returncode == 0, f"arex rollout exited {proc.returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "Traceback" not in stdout + stderr, stdout + stderr
    assert not teacher.errors, teacher.errors
    summary = json.loads((work / out / "summary.json").read_text())
    assert summary["endings"] == {"done": 1}, summary
    [path] = (work / out / "subset-fill").glob("*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert str(ROOT) not in path.read_text()
    with_skills = [m for m in teacher.mounts or [] if "/skills" in m]
    assert len(with_skills) == 1, teacher.mounts  # exactly the rollout's sandbox
    return lines, requests, with_skills[0]


def test_wheel_ships_prompts_skills_and_sandbox_runtime(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (
        "arex/data/prompts/default.yaml",
        "arex/sandbox/runner.c",
        "arex/sandbox/box/init.py",
        "arex/sandbox/box/server.py",
        "arex/sandbox/box/unpack.py",
    ):
        assert name in names, name
    # Every file of the package's data folders, at any depth (skills carry scripts/ and references/);
    # the top-level skills/ catalogue as arex/_skills.
    shipped_as = {"arex/data": "arex/data", "arex/sandbox/box": "arex/sandbox/box", "skills": "arex/_skills"}
    for folder, shipped in shipped_as.items():
        files = [p for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        rels = [p.relative_to(ROOT / folder).as_posix() for p in files if p.suffix != ".pyc"]
        assert rels
        missing = sorted(f"{folder}/{rel}" for rel in rels if f"{shipped}/{rel}" not in names)
        assert not missing, missing
    assert sum(n.startswith("arex/_skills/") and n.endswith("/SKILL.md") for n in names) >= 8
    outside = ("tests", "envs", "configs", "scripts", "skills")
    assert not [n for n in names if n.endswith(".pyc") or n.split("/")[0] in outside]


def test_the_venv_runs_the_wheel_not_the_checkout(venv):
    info, site = venv["info"], venv["site"]
    venv_dir = venv["base"] / "venv"
    assert Path(info["arex"]).is_relative_to(venv_dir), info
    assert not Path(info["arex"]).is_relative_to(ROOT)
    assert Path(info["dist"]).is_relative_to(venv_dir), info
    assert info["direct_url"] is None or '"editable": true' not in info["direct_url"], info  # a wheel, not `-e`
    assert Path(info["skills"]) == (site / "arex" / "_skills").resolve(), info
    assert info["prompts"] >= 11
    assert info["unmet"] == [], info  # every runtime dependency of the installed arex is there


def test_build_envs_and_rollout_with_the_bundled_prompts_and_skills(venv, built):
    # A marker in the installed prompts file: the teacher must see it, so the prompts were read
    # from the installed package and not from the checkout's copy.
    installed = venv["site"] / "arex" / "data" / "prompts" / "default.yaml"
    prompts = yaml.safe_load(installed.read_text())
    marker = f"[prompts from {installed}]"
    prompts["system"] = marker + "\n" + prompts["system"]
    installed.write_text(yaml.safe_dump(prompts, sort_keys=False))

    def commands(n):
        if n == 1:
            return ["ls /skills", "head -3 solution.py"]
        return [f"cat > solution.py <<'EOF'\n{EXACT_PY}EOF"]

    teacher = Teacher(commands)
    lines, requests, mounts = rollout(venv, built, teacher, "rollouts", 2)

    [header] = [x for x in lines if x["type"] == "header"]
    assert header["config"]["skills_dir"] is None and header["config"]["prompts"] is None  # the bundled ones
    ends = [x for x in lines if x["type"] == "round_end"]
    assert [x["round"] for x in ends] == [1, 2]
    scores = [x["grade"]["held_out_score"] for x in ends]
    assert 0.5 < scores[0] < 1.0 and scores[1] == 1.0, scores  # the greedy starter, then the exact DP
    assert all(x["grade"].get("infra_error") is None for x in ends)
    [end] = [x for x in lines if x["type"] == "end"]
    assert end["status"] == "done"
    listing = next(x for x in lines if x["type"] == "step" and x["round"] == 1 and x["step"] == 0)["observation"]
    assert "cpp-fast-io" in listing and "stress-test-brute-force" in listing

    # The prompts, the skills mount and the sandbox runtime all came from the install.
    system = requests[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(marker)
    assert "cpp-fast-io" in system["content"]  # the skill catalogue
    assert Path(mounts["/skills"]) == (venv["site"] / "arex" / "_skills").resolve(), mounts
    runtime = venv["base"] / "cache" / "runtime" / venv["info"]["runtime"]
    assert Path(mounts["/.arex"]) == runtime, mounts
    assert (runtime / "arex-run").is_file()
    assert (runtime / "runner.c").read_bytes() == (venv["site"] / "arex" / "sandbox" / "runner.c").read_bytes()


def test_prompts_and_skills_overridable_by_config(venv, built):
    work = built.parent
    skills = work / "my-skills"
    (skills / "my-skill").mkdir(parents=True)
    (skills / "my-skill" / "SKILL.md").write_text(
        "---\nname: my-skill\ndescription: A skill of the user's own.\n---\n\nUse it.\n"
    )
    prompts = yaml.safe_load((venv["site"] / "arex" / "data" / "prompts" / "default.yaml").read_text())
    prompts["system"] = "[the user's prompts]\n" + prompts["system"]
    (work / "my-prompts.yaml").write_text(yaml.safe_dump(prompts, sort_keys=False))

    teacher = Teacher(lambda n: ["ls /skills"])
    lines, requests, mounts = rollout(
        venv,
        built,
        teacher,
        "rollouts-custom",
        1,
        "-c",
        "rollout.skills_dir=my-skills",
        "-c",
        "rollout.prompts=my-prompts.yaml",
    )

    system = requests[0]["messages"][0]["content"]
    assert system.startswith("[the user's prompts]") and "my-skill" in system and "cpp-fast-io" not in system
    assert Path(mounts["/skills"]) == skills.resolve(), mounts
    step = next(x for x in lines if x["type"] == "step" and x["round"] == 1 and x["step"] == 0)
    assert "my-skill" in step["observation"] and "cpp-fast-io" not in step["observation"]
    assert [x["round"] for x in lines if x["type"] == "round_end"] == [1]
