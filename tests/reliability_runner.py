"""The child process of the reliability suites: a rollout batch or an `arex` command on the `tally`
test kind, with pause points (tests/reliability_hooks.py), for the test to SIGKILL.

    python tests/reliability_runner.py rollout '<json spec>'
    python tests/reliability_runner.py cli select --store ... (any arex command line)
    python tests/reliability_runner.py serve

`serve` imports everything once, then reads one job a line on stdin ({"args": [...], "env": {...},
"log": path}) and runs each in a forked child: it prints {"pid": ...} when the child starts and
{"exit": pid, "code": ...} when it ends. The child is a whole process like the others (it is what
the test SIGKILLs), without two seconds of imports each time: what makes 20+ kills affordable.

The rollout spec: envs (folders), store, base_url, samples, concurrency, backend ("process" or
"docker"), teacher and rollout (keyword arguments of TeacherConfig and RolloutConfig).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

import reliability_hooks

from arex.envs.runtime import load_env
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherConfig


def rollout(spec: dict) -> int:
    reliability_hooks.install(spec.get("backend", "process"))
    envs = [load_env(Path(d)) for d in spec["envs"]]
    teacher = TeacherConfig(**spec["teacher"])
    config = RolloutConfig(**spec["rollout"])
    sandbox = SandboxConfig(backend=spec.get("backend", "process"))
    reliability_hooks.PROBE.event("ready")
    asyncio.run(
        run_batch(
            envs,
            teacher,
            config,
            sandbox,
            Path(spec["store"]),
            spec.get("samples", 1),
            spec.get("concurrency", 2),
            spec["base_url"],
        )
    )
    return 0


def _load_cli():
    import matplotlib.pyplot  # noqa: F401 - loaded before `ready`, as the commands would load them
    import pyarrow.parquet  # noqa: F401

    import arex.dataset.card  # noqa: F401
    import arex.dataset.export  # noqa: F401
    import arex.selection.selector  # noqa: F401
    from arex.cli import app

    return app


def cli(args: list[str]) -> int:
    app = _load_cli()
    reliability_hooks.install("process")
    reliability_hooks.PROBE.event("ready")
    try:
        app(args, prog_name="arex")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def job(args: list[str]) -> int:
    code = rollout(json.loads(args[1])) if args[0] == "rollout" else cli(args[1:])
    reliability_hooks.counts_event()
    return code


def serve() -> None:
    _load_cli()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}), flush=True)


def _child(request: dict) -> None:
    code = 1
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.update(request.get("env", {}))
        tempfile.tempdir = None  # TMPDIR may differ from the server's
        reliability_hooks.PROBE.configure()
        code = job(request["args"])
    except BaseException:  # noqa: BLE001 - the child reports everything, then exits
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> int:
    if sys.argv[1] == "serve":
        serve()
        return 0
    return job(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
