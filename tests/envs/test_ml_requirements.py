"""ML requirements: one canonical order, a preflight on the base image that names a pin that cannot
install before anything is built, relaxed pins recorded in task.yaml, and resolve_pins.

Real parts: git repositories made here, the Docker engine, arex-base's Python, the package index
this machine reaches (as the other ML tests that pip-install)."""

import os
import re
import textwrap
import time
from pathlib import Path

import docker
import git
import pytest
import yaml

from arex.envs.build import build_envs
from arex.envs.judge_sources import SourceError
from arex.envs.ml_images import deps_image, deps_tag, preflight, requirement_lines, resolve_pins
from arex.sandbox import SandboxConfig
from arex.specs import MLSpec

BASE = SandboxConfig().image


def _spec(**overrides) -> MLSpec:
    raw = {
        "id": "reqs",
        "title": "t",
        "run": "python3 train.py",
        "metric": {"name": "rmse", "direction": "minimize"},
        "data": {"table": "t.csv", "target": "y"},
    }
    return MLSpec.model_validate({**raw, **overrides})


# -- normalisation (no engine) ------------------------------------------------------------------
def test_order_comments_and_name_spelling_do_not_matter(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "requirements.txt").write_text(
        "# pinned for the paper\nSix==1.16.0   # utilities\n\n-r extra/more.txt\n"
    )
    (tmp_path / "one" / "extra").mkdir()
    (tmp_path / "one" / "extra" / "more.txt").write_text("Tomli \\\n  == 2.0.1\nsix==1.16.0\n")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "reqs.txt").write_text("tomli==2.0.1\n\n")
    one = requirement_lines(
        _spec(requirements=["PyYAML>=6", "typing_extensions"], requirements_file="requirements.txt"), tmp_path / "one"
    )
    two = requirement_lines(
        _spec(requirements=["typing-extensions", "six == 1.16.0", "pyyaml >= 6"], requirements_file="reqs.txt"),
        tmp_path / "two",
    )
    assert one == two == ["pyyaml>=6", "six==1.16.0", "tomli==2.0.1", "typing-extensions"]
    (tmp_path / "windows").mkdir()  # `pip freeze > requirements.txt` in Windows PowerShell writes UTF-16
    (tmp_path / "windows" / "requirements.txt").write_bytes("TOMLI==2.0.1\r\nsix==1.16.0\r\n".encode("utf-16"))
    assert requirement_lines(_spec(requirements_file="requirements.txt"), tmp_path / "windows") == [
        "six==1.16.0",
        "tomli==2.0.1",
    ]


@pytest.mark.parametrize(
    "line, message",
    [
        ("-e .", "requirements.txt line 2: '-e .' installs a folder of the repository in editable mode"),
        ("./vendor/pkg", "requirements.txt line 2: './vendor/pkg' is a local path"),
        (
            "-r ../outside.txt",
            "requirements.txt line 2: '-r ../outside.txt' names a requirements file that is not in the repository",
        ),
        ("-c constraints.txt", "requirements.txt line 2: '-c constraints.txt' is a constraints file"),
        ("numpy=1.2", "requirements.txt line 2: 'numpy=1.2' is not a requirement pip can read"),
    ],
)
def test_lines_that_need_the_repository_are_refused_naming_file_and_line(tmp_path, line, message):
    (tmp_path / "requirements.txt").write_text(f"six\n{line}\n")
    (tmp_path / "constraints.txt").write_text("six<2\n")
    with pytest.raises(SourceError) as exc:
        requirement_lines(_spec(requirements_file="requirements.txt"), tmp_path)
    assert str(exc.value).startswith(message), str(exc.value)
    assert str(exc.value).count(". ") == 0  # one sentence


# -- real containers and the real package index ------------------------------------------------
@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def image_python() -> str:
    out = docker.from_env().containers.run(
        BASE, ["python3", "-c", "import platform; print(platform.python_version())"], remove=True, network_mode="none"
    )
    return out.decode().strip()


@pytest.mark.docker
def test_requirement_order_does_not_change_the_deps_image(tmp_path, fresh_cache):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "requirements.txt").write_text("Tomli==2.0.1\n")
    (tmp_path / "b" / "requirements.txt").write_text("# same, other spelling\nsix==1.16.0\n")
    first = _spec(requirements=["six==1.16.0"], requirements_file="requirements.txt")
    second = _spec(requirements=["tomli == 2.0.1 # comment"], requirements_file="requirements.txt")
    tag_a, settled = deps_tag(first, tmp_path / "a", BASE)
    tag_b, _ = deps_tag(second, tmp_path / "b", BASE)
    assert tag_a == tag_b and settled.lines == ["six==1.16.0", "tomli==2.0.1"]
    assert settled.preflight is not None and settled.preflight.installs == {"six": "1.16.0", "tomli": "2.0.1"}
    assert deps_image(second, tmp_path / "b", BASE) == tag_a
    shown = docker.from_env().containers.run(
        tag_a, ["python3", "-c", "import six, tomli; print(six.__version__)"], remove=True, network_mode="none"
    )
    assert shown.decode().strip() == "1.16.0"
    other, _ = deps_tag(_spec(requirements=["six==1.17.0", "tomli==2.0.1"]), tmp_path / "a", BASE)
    assert other != tag_a  # a different pin is a different image


TRAIN = """
import csv
import numpy as np
rows = list(csv.DictReader(open("data/train.csv")))
x = np.array([float(r["x"]) for r in rows])
y = np.array([float(r["y"]) for r in rows])
slope, intercept = np.polyfit(x, y, 1)
test = list(csv.DictReader(open("data/test.csv")))
with open("submission.csv", "w") as f:
    f.write("id,prediction\\n")
    for r in test:
        f.write(f"{r['id']},{intercept + slope * float(r['x'])}\\n")
"""


def numpy_repo(path: Path, **spec_overrides) -> Path:
    """A real repository whose training script needs numpy, pinned (in its requirements file) to a
    release with no wheel for the image's Python."""
    path.mkdir(parents=True)
    repo = git.Repo.init(path, initial_branch="main")
    repo.config_writer().set_value("user", "name", "t").set_value("user", "email", "t@t").release()
    (path / "data").mkdir()
    (path / "data" / "full.csv").write_text("x,y\n" + "".join(f"{x},{2 * x + (x * 31) % 11}\n" for x in range(120)))
    (path / "README.md").write_text("Predict y from x.\n")
    (path / "train.py").write_text(textwrap.dedent(TRAIN))
    (path / "requirements.txt").write_text("# from the paper's environment\nnumpy==1.16.6\n")
    spec = {
        "id": path.name,
        "title": "linear with numpy",
        "run": "python3 train.py",
        "requirements_file": "requirements.txt",
        "metric": {"name": "rmse", "direction": "minimize"},
        "data": {"table": "data/full.csv", "target": "y"},
        "time_limit_s": 60,
        "mutation": {"file": "train.py", "find": "intercept + slope", "replace": "0 * slope"},
        **spec_overrides,
    }
    (path / "arex.yaml").write_text(yaml.safe_dump(spec))
    repo.index.add(["data/full.csv", "README.md", "train.py", "requirements.txt", "arex.yaml"])
    repo.index.commit("numpy pinned as in 2019")
    return path


def _our_containers(since: float) -> list[str]:
    """Names (arex.name label) of the containers this process created since `since` (engine events)."""
    events = docker.from_env().events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "event": "create", "label": f"arex.owner_pid={os.getpid()}"},
    )
    return [e["Actor"]["Attributes"].get("arex.name", "") for e in events if e["timeNano"] >= since * 1e9]


@pytest.mark.docker
def test_a_pin_without_a_wheel_is_rejected_by_the_preflight(tmp_path, fresh_cache):
    python = image_python()
    source = numpy_repo(tmp_path / "old-numpy")
    since = time.time()
    (report,) = build_envs([source], tmp_path / "out", SandboxConfig())
    assert report.status == "rejected" and report.gates == []
    reason = report.reason
    assert reason.startswith(f"Requirements preflight (pip dry run on {BASE}, Python {python}): numpy==1.16.6 ")
    assert f"cannot be installed from a wheel for Python {python}" in reason
    assert "set 'requirements_relax: true' to use" in reason and "list numpy in 'build_from_source'" in reason
    assert reason.count(". ") == 0 and reason.endswith(".")  # one sentence
    assert not re.search(r"gcc|cc1|Building wheel|setup\.py|error: command", reason)  # nothing was compiled
    # Only the preflight container ran (no deps build, no data preparation, no gates) ...
    assert _our_containers(since) == ["preflight"]
    # ... and the report says what the preflight found: its cached result names the nearest release.
    cached = preflight(["numpy==1.16.6"], BASE)
    assert cached.from_cache and cached.python == python and cached.failure is not None
    assert cached.failure.requirement == "numpy==1.16.6" and cached.failure.versions
    nearest = next(v for v in cached.failure.versions if "rc" not in v)
    assert f"the nearest versions that install are {nearest} above" in reason
    assert not (tmp_path / "out" / "old-numpy").exists()


@pytest.mark.docker
def test_relaxed_pin_builds_and_is_recorded(tmp_path, fresh_cache):
    source = numpy_repo(tmp_path / "relaxed-numpy", requirements_relax=True)
    (report,) = build_envs([source], tmp_path / "out", SandboxConfig())
    assert report.status == "accepted", report.reason
    task = yaml.safe_load((tmp_path / "out" / "relaxed-numpy" / "task.yaml").read_text())
    change = task["requirements_relaxed"]["numpy"]
    old, new = change.split(" -> ")
    assert old == "1.16.6" and tuple(map(int, new.split("."))) > (1, 16, 6)
    assert f"requirements relaxed: numpy 1.16.6 -> {new}" in report.reason
    installed = docker.from_env().containers.run(
        task["image"],
        ["python3", "-c", "import numpy; print(numpy.__version__)"],
        remove=True,
        network_mode="none",
        user="1000",
    )
    assert installed.decode().strip() == new
    assert report.scores["baseline"] < report.scores["noop"]  # numpy's fit really ran


@pytest.mark.docker
def test_resolve_pins_pins_unpinned_names(fresh_cache):
    pins = resolve_pins(["six", "Tomli"], BASE)
    assert set(pins) == {"six", "Tomli"} and all(re.fullmatch(r"\d+(\.\d+)+", v) for v in pins.values())
    check = preflight([f"six=={pins['six']}", f"tomli=={pins['Tomli']}"], BASE)
    assert check.ok and check.installs == {"six": pins["six"], "tomli": pins["Tomli"]}
    with pytest.raises(SourceError, match=r"numpy==1\.16\.6 in the requirements to pin cannot be installed"):
        resolve_pins(["numpy==1.16.6"], BASE)
