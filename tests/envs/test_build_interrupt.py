"""`arex build-envs` left running: a line per source started and finished on a stderr that is a file,
and SIGTERM stops the batch (no source starts any more, the running one finishes, the report covers
what is done); a second SIGTERM aborts the running ones (their sandboxes stopped, their staging
folders deleted) and the process ends without waiting for them. Once, the worker pool went on
starting queued sources for minutes after SIGTERM, and only SIGKILL ended it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from polling import deadline_poll

pytestmark = pytest.mark.docker

TASK = """id: {id}
title: Sum {id}
time_limit_s: 2
memory_mb: 256
checker: {{kind: token}}
scoring: fraction
solutions:
  - {{path: solutions/ok.py, expected: accepted}}
"""


def _sources(root, names):
    sources = []
    for name in names:
        folder = root / name
        (folder / "private" / "tests").mkdir(parents=True)
        (folder / "solutions").mkdir()
        (folder / "task.yaml").write_text(TASK.format(id=name))
        (folder / "statement.md").write_text("Print a + b.\n")
        (folder / "solutions" / "ok.py").write_text("a, b = map(int, input().split())\nprint(a + b)\n")
        for i in range(1, 3):
            (folder / "private" / "tests" / f"main-{i}.in").write_text(f"{i} {i}\n")
            (folder / "private" / "tests" / f"main-{i}.ans").write_text(f"{2 * i}\n")
        sources.append(str(folder))
    return sources


def _start(tmp_path, names, concurrency):
    log = tmp_path / "stderr.log"
    out = tmp_path / "out"
    command = [sys.executable, "-m", "arex.cli", "build-envs", *_sources(tmp_path / "src", names)]
    with open(log, "w") as stderr:  # not a terminal: a log file, as under nohup or a scheduler
        proc = subprocess.Popen(
            [*command, "--out", str(out), "--concurrency", str(concurrency)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return proc, log, out


def _saw(log, text):
    return text in log.read_text()


def _staging(out):
    return sorted(p.name for p in out.glob(".*-staging-*"))


def test_sigterm_stops_starting_sources_and_reports_what_is_done(tmp_path):
    names = ["stop-a", "stop-b", "stop-c"]
    proc, log, out = _start(tmp_path, names, concurrency=1)
    try:
        deadline_poll(lambda: _saw(log, "arex: started stop-a"), 300, "the first source to start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=600) == 143
    finally:
        proc.kill()
    text = log.read_text()
    assert "stopping: no more sources start; waiting for the 1 running" in text, text
    assert "arex: finished stop-a" in text and "accepted" in text, text
    assert "started stop-b" not in text and "started stop-c" not in text, text
    report = json.loads((out / "build-report.json").read_text())
    assert [r["env_id"] for r in report["envs"]] == ["stop-a"], report
    assert (out / "stop-a" / "task.yaml").is_file()
    assert not (out / "stop-b").exists() and not (out / "stop-c").exists()
    assert _staging(out) == []


def test_second_sigterm_aborts_the_running_sources(tmp_path):
    names = ["abort-a", "abort-b"]
    proc, log, out = _start(tmp_path, names, concurrency=2)
    try:
        deadline_poll(
            lambda: _saw(log, "started abort-a") and _saw(log, "started abort-b"), 300, "both sources to start"
        )
        proc.send_signal(signal.SIGTERM)
        deadline_poll(lambda: _saw(log, "arex: stopping:"), 120, "the first signal to be seen")
        if proc.poll() is None and "finished abort-a" not in log.read_text():
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 143
    finally:
        proc.kill()
    text = log.read_text()
    finished = [name for name in names if f"arex: finished {name}" in text]
    if len(finished) < len(names):  # the second signal came while a source was running
        assert "arex: aborting:" in text and "arex: aborted:" in text, text
    report = json.loads((out / "build-report.json").read_text())
    assert sorted(r["env_id"] for r in report["envs"]) == sorted(finished), (report, text)
    assert _staging(out) == []
    owner = f"label=arex.owner_pid={proc.pid}"
    listed = lambda: subprocess.run(  # noqa: E731
        ["docker", "ps", "-aq", "--filter", owner], capture_output=True, text=True
    ).stdout.split()
    deadline_poll(lambda: not listed(), 120, "the aborted build's sandboxes to be gone")
