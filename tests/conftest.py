"""Fixtures shared by test modules live here (helpers imported by name live in tests/*_kit.py,
tests/repo_paths.py and the other non-test modules of tests/, all on the path: pyproject's
`pythonpath`)."""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from loop_kit import PROCESS_BACKEND, TallyEnv, write_tally_env
from repo_paths import ENVS

# The bundled envs that test modules share, built once per test run (see `bundled_envs`).
SHARED_BUNDLED = ("judge-subset-fill", "ml-diabetes")
# Tests that need the machine to themselves: they load every CPU on purpose, or are judged by how the
# host copes. Marked `serial` here (by node id, under tests/), so `make test` runs them after the
# parallel part, alone.
EXCLUSIVE = (
    "test_judge_verdicts.py::test_same_verdicts_under_host_load",  # starves every CPU, judges the backstop
    "test_host_load.py::test_build_and_grade_under_host_load_as_idle",  # likewise, for the judge's own steps
    "test_host_load.py::test_a_step_starved_to_its_cap_is_the_hosts_failure",  # likewise, to the hard caps
    "test_sandbox_conformance.py::test_docker_backend[fork_bomb_is_contained]",  # the host must still fork
    "test_unshare_backend.py::test_unshare_backend[fork_bomb_is_contained]",  # likewise, on the unshare backend
)


# Seconds each test module took in a recorded run (`pytest --write-durations`): make test starts the longest
# first, so the two workers do not end with one of them alone on a long module (longest-first scheduling).
DURATIONS = Path(__file__).parent / "durations.json"
_seconds: Counter[str] = Counter()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--write-durations", action="store_true", help="record each test module's seconds in tests/durations.json"
    )


def _module(item_or_report) -> str:
    return item_or_report.nodeid.split("::")[0]


def _order_longest_first(items: list[pytest.Item]) -> None:
    """Modules by recorded seconds, longest first (a module never recorded counts as the longest: it may
    be long); the order within a module is kept."""
    try:
        seconds = {str(k): float(v) for k, v in json.loads(DURATIONS.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return
    unknown = max(seconds.values(), default=0.0) + 1.0
    items.sort(key=lambda item: -seconds.get(_module(item), unknown))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[_module(report)] += report.duration  # setup, call and teardown; workers' reports too


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("--write-durations") or hasattr(session.config, "workerinput"):
        return
    try:
        recorded = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    recorded.update({module: round(seconds, 1) for module, seconds in _seconds.items()})
    DURATIONS.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n", encoding="utf-8")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its hook has no order of its own)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark EXCLUSIVE tests `serial`; put the tests of a module that share one of its module-scoped
    fixtures in one pytest-xdist group (`--dist loadgroup`), so one worker builds that fixture once
    rather than each worker that gets one of its tests building it again."""
    for item in items:
        if item.nodeid.split("/")[-1] in EXCLUSIVE:
            item.add_marker(pytest.mark.serial)
        defs = getattr(item, "_fixtureinfo", None)
        if defs is None:
            continue
        if any(d.scope == "module" for ds in defs.name2fixturedefs.values() for d in ds):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    _order_longest_first(items)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing), released on exit or when the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every pytest-xdist worker of it shares: each worker's
    basetemp is a child of the run's; without xdist, the basetemp itself."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def bundled_envs(tmp_path_factory) -> Path:
    """The folder the bundled envs of SHARED_BUNDLED are built into, once per test run: the first
    worker to get here builds (in Docker, with every validation gate), the others wait on the lock
    and find them built (arex's build skips a source whose content hash matches its last build).
    Read-only for tests: a test that changes an env copies it first."""
    from arex.envs.build import build_envs

    root = _run_folder(tmp_path_factory) / "bundled-envs"
    with _file_lock(root.with_name("bundled-envs.lock")):
        reports = build_envs([ENVS / name for name in SHARED_BUNDLED], root / "built")
    assert all(r.status in ("accepted", "skipped") for r in reports), [(r.env_id, r.status, r.reason) for r in reports]
    return root / "built"


@pytest.fixture
def tally_kind(monkeypatch) -> None:
    """The fast tier's `tally` env kind (tests/loop_kit.py) and the `process` test backend registered."""
    from arex.envs import runtime
    from arex.sandbox.base import BACKENDS

    monkeypatch.setitem(runtime.KINDS, "tally", TallyEnv)
    monkeypatch.setitem(BACKENDS, "process", PROCESS_BACKEND)


@pytest.fixture
def tally_env(tmp_path, tally_kind):
    """A built `tally` env in tmp_path/envs/tally, its kind registered."""
    from arex.envs.runtime import load_env

    return load_env(write_tally_env(tmp_path / "envs"))


@pytest.fixture(scope="module")
def zygote():
    """Forks the killed processes (tests/reliability_runner.py serve): no imports per kill."""
    from reliability_kit import Zygote

    with Zygote() as server:
        yield server


@pytest.fixture(scope="session")
def smol(tmp_path_factory):
    """SmolLM2-135M dequantized from the bundled GGUF, and its tokenizer, saved as folders once per
    worker (read-only for tests)."""
    from types import SimpleNamespace

    from transformers.trainer_utils import validate_quantization_for_training

    from arex.dataset.masks import load_tokenizer
    from arex.dataset.train import load_model
    from arex.teacher.local import find_gguf

    root = tmp_path_factory.mktemp("smol")
    model = load_model()  # the Trainer accepts it: the quantization flags are cleared
    validate_quantization_for_training(model)
    flagged = SimpleNamespace(
        is_quantized=True,
        hf_quantizer=SimpleNamespace(is_trainable=False, quantization_config=SimpleNamespace(quant_method="gguf")),
    )
    with pytest.raises(ValueError, match="purely quantized"):  # what the flags alone would do
        validate_quantization_for_training(flagged)
    model.save_pretrained(root / "model")
    load_tokenizer(find_gguf()).save_pretrained(root / "tokenizer")
    return {"model": root / "model", "tokenizer": root / "tokenizer"}
