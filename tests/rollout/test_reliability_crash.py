"""Crash and resume: `arex rollout`, `arex select` and `arex export` SIGKILLed at many moments,
then re-run; nothing may be lost, duplicated, corrupted or falsified (issue 13, "Suites").

The killed process is tests/reliability_runner.py: a rollout batch on the `tally` test kind and
the `process` backend (no Docker; `test_docker_rollout_survives_sigkill` is the Docker variant),
or an arex command. The scripted teacher lives in this process and outlives every kill. Kill
points are chosen with a fixed seed, cycling through the child's pause points (mid-step,
mid-grade, mid-snapshot, mid-reflection, mid-write of a record line, just before a file-system
commit) and kills after a random delay. Figures are printed; docs/reliability.md has the table.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from reliability_kit import (
    CountingServer,
    Outcome,
    Zygote,
    audit_store,
    make_tally_env,
    notes_commands,
    raw_lines,
    record_spend,
    rollout_args,
    run_child,
    show,
    total_billed,
)
from typer.testing import CliRunner

from arex.cli import app
from arex.record.trajectory import load
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.suite  # a reliability suite: run by `make test`, not `make test-fast`

SEED = 20240613
KILLS = 40
ROUNDS = 10
TEACHER = {"model": "scripted-teacher", "track_cost": False, "backoff_base_s": 0.01, "max_attempts": 3}
PLAN = ["step", "call", "grade", "snapshot", "reflect", "write", "write-u", "fs", "random", "random"]
"""Kill points, in turn: pause points of the child (tests/reliability_hooks.py) and random delays."""
SELECTIONS, EXPORT_KILLS = 8, 8
RANGES = {
    "step": (1, 15),
    "call": (1, 15),
    "grade": (1, 5),
    "snapshot": (1, 5),
    "reflect": (1, 5),
    "write": (2, 30),
    "fs": (1, 20),
}


def kill_point(kind: str, rng: random.Random) -> tuple[str | None, float | None]:
    """(pause spec, delay) for one kill of the given kind."""
    if kind == "random":
        return None, rng.uniform(0.0, 0.8)
    if kind.startswith("write"):
        return (
            f"write:{rng.randint(*RANGES['write'])}:{rng.uniform(0.05, 0.95):.3f}{'u' if kind == 'write-u' else ''}",
            None,
        )
    return f"{kind}:{rng.randint(*RANGES[kind])}", None


def records(store: Path) -> list[Path]:
    return sorted(store.glob("*/*.jsonl"))


def unreadable(store: Path) -> list[str]:
    """Records that do not load as they were left (a cut last line must load)."""
    bad = []
    for path in records(store):
        try:
            load(path)
        except Exception as exc:  # noqa: BLE001 - any failure counts
            bad.append(f"{path.name}: {type(exc).__name__}: {exc}")
    return bad


class KillLoop:
    """Kills a rollout batch again and again, re-running it each time, until `kills` kills landed."""

    def __init__(
        self,
        tmp_path: Path,
        envs: list[Path],
        base_url: str,
        backend: str,
        samples: int,
        concurrency: int,
        zygote: Zygote,
    ):
        self.zygote = zygote
        self.store, self.events = tmp_path / "store", tmp_path / "events.log"
        self.sandbox_tmp = tmp_path / "sandbox-tmp"
        self.sandbox_tmp.mkdir()
        self.spec = {
            "envs": [str(e) for e in envs], "store": str(self.store), "base_url": base_url,
            "samples": samples, "concurrency": concurrency, "backend": backend,
            "teacher": TEACHER, "rollout": {"rounds": ROUNDS},
        }  # fmt: skip
        self.kills: Counter = Counter()
        self.pids: list[int] = []
        self.runs = self.cut_lines = 0
        self.after_kill = None  # called with each killed child's pid
        self.unreadable_after_kill: list[str] = []

    def run(self, pause: str | None = None, delay: float | None = None) -> Outcome:
        outcome = run_child(
            rollout_args(self.spec),
            self.events,
            pause,
            delay,
            env={"TMPDIR": str(self.sandbox_tmp)},
            zygote=self.zygote,
        )
        self.runs += 1
        self.pids.append(outcome.pid)
        if outcome.killed:
            self.kills[outcome.where] += 1
            self.cut_lines += sum(raw_lines(p)[1] for p in records(self.store))
            self.unreadable_after_kill += unreadable(self.store)
            if self.after_kill:
                self.after_kill(outcome.pid)
        return outcome

    def kill_until(self, kills: int, plan: list[str], rng: random.Random) -> None:
        while sum(self.kills.values()) < kills:
            kind = plan[sum(self.kills.values()) % len(plan)]
            outcome = self.run(*kill_point(kind, rng))
            if not outcome.killed:  # everything finished before the kill point: add a rollout
                self.spec["samples"] += 1


def test_rollouts_survive_sigkill_at_random_moments(tmp_path, capsys, zygote):
    envs = [make_tally_env(tmp_path / "envs", "crash")]
    rng = random.Random(SEED)
    with ScriptedServer(RoundScript(notes_commands), model="scripted-teacher") as server:
        loop = KillLoop(tmp_path, envs, server.base_url, "process", samples=3, concurrency=2, zygote=zygote)
        loop.kill_until(KILLS, PLAN, rng)
        assert not loop.run().killed  # the last run, not killed, finishes everything
        audit = audit_store(loop.store, ROUNDS)
        # Finished exactly once: one more run asks the teacher nothing and changes no byte.
        before, requests = {p: p.read_bytes() for p in records(loop.store)}, server.stats["requests"]
        loop.run()
        rerun_requests = server.stats["requests"] - requests
        rerun_changed = sum(p.read_bytes() != data for p, data in before.items())
        billed, recorded = total_billed(server), sum(record_spend(p)[0] for p in records(loop.store))
    left = len(list(loop.sandbox_tmp.glob("arex-process-*")))
    show(capsys, "crash and resume: arex rollout (process backend)", {
        "kills": f"{sum(loop.kills.values())} ({', '.join(f'{k} {v}' for k, v in sorted(loop.kills.items()))})",
        "runs": loop.runs, "rollouts": f"{audit.records} ({audit.finished} finished once, {audit.rounds} rounds)",
        "duplicate rounds": audit.duplicate_rounds, "missing rounds": audit.missing_rounds,
        "workspace/record disagreements": audit.disagreements, "corrupt files": audit.corrupt_files,
        "records unreadable right after a kill": len(loop.unreadable_after_kill),
        "cut last lines seen after kills (repaired on resume)": loop.cut_lines,
        "stray temporary/snapshot files": audit.stray_files,
        "requests / changed files on a re-run after finishing": f"{rerun_requests} / {rerun_changed}",
        "teacher tokens billed / recorded":
            f"{billed} / {recorded} ({recorded / max(1, billed):.1%}; calls in flight at a kill cannot be recorded)",
        "sandbox folders left by killed runs (process backend)": left,
    })  # fmt: skip
    assert sum(loop.kills.values()) >= 20
    assert loop.unreadable_after_kill == []
    assert audit.stray_files == 0, audit.problems  # a re-run prunes what a kill left
    assert audit.finished == audit.records == loop.spec["samples"]
    assert (audit.duplicate_rounds, audit.missing_rounds, audit.disagreements, audit.corrupt_files) == (0, 0, 0, 0)
    assert (rerun_requests, rerun_changed) == (0, 0)


def test_a_kill_while_pruning_the_last_round_leaves_no_stray_snapshot(tmp_path, zygote):
    """Killed after the last round_end is written but before the archives no round names any more
    are deleted: the re-run has no round left to play, and must still delete them."""
    env = make_tally_env(tmp_path / "envs", "prune")
    with ScriptedServer(RoundScript(notes_commands), model="scripted-teacher") as server:
        loop = KillLoop(tmp_path, [env], server.base_url, "process", samples=1, concurrency=1, zygote=zygote)
        loop.spec["rollout"] = {"rounds": 3}
        assert loop.run("prune:3").where == "prune"
        assert not loop.run().killed
    audit = audit_store(loop.store, 3)
    assert audit.finished == 1 and audit.stray_files == 0, audit.problems


@pytest.mark.docker
def test_docker_rollout_survives_sigkill(tmp_path, capsys, zygote):
    """The Docker variant: fewer kills; a re-run after a kill removes what the killed run left."""
    import docker

    envs = [make_tally_env(tmp_path / "envs", "crash-docker")]
    rng = random.Random(SEED + 1)
    client = docker.from_env()
    with ScriptedServer(RoundScript(notes_commands), model="scripted-teacher") as server:
        loop = KillLoop(tmp_path, envs, server.base_url, "docker", samples=1, concurrency=1, zygote=zygote)
        loop.spec["rollout"] = {"rounds": 8}
        orphaned = Counter()
        loop.after_kill = lambda pid: orphaned.update(
            {"containers": len(client.containers.list(all=True, filters={"label": f"arex.owner_pid={pid}"}))}
        )
        try:
            loop.kill_until(6, ["step", "grade", "reflect", "write", "random", "random"], rng)
            assert not loop.run().killed
            audit = audit_store(loop.store, 8)
            left = [
                c
                for c in client.containers.list(all=True, filters={"label": "arex.sandbox"})
                if c.labels.get("arex.owner_pid") in {str(p) for p in loop.pids}
            ]
        finally:
            # ours only, by owner pid
            for container in client.containers.list(all=True, filters={"label": "arex.sandbox"}):
                if container.labels.get("arex.owner_pid") in {str(p) for p in loop.pids}:
                    container.remove(force=True)
    show(capsys, "crash and resume: arex rollout (Docker backend)", {
        "kills": f"{sum(loop.kills.values())} ({', '.join(f'{k} {v}' for k, v in sorted(loop.kills.items()))})",
        "rollouts": f"{audit.records} ({audit.finished} finished once)", "duplicate rounds": audit.duplicate_rounds,
        "workspace/record disagreements": audit.disagreements, "corrupt files": audit.corrupt_files,
        "containers of the killed run, right after each kill (summed)": orphaned["containers"],
        "containers left after the re-runs": len(left),
    })  # fmt: skip
    assert audit.problems == [] and audit.finished == audit.records == loop.spec["samples"]
    assert len(left) == 0, [c.name for c in left]


# -- select and export --------------------------------------------------------------------------------
def cli(*args: str) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output


def files_of(folder: Path) -> dict[str, bytes]:
    return (
        {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        if folder.is_dir()
        else {}
    )


def choose(
    census: Outcome, phases: tuple[str, ...], rng: random.Random, index: int, kills: int
) -> tuple[str | None, float | None]:
    """Every other kill after a random delay; the others at pause points spread evenly over the
    census (stratified: kill j of k lands in the j-th k-th of the pause points, at random within it)."""
    if index % 2:
        return None, rng.uniform(0.0, max(0.05, census.counts.get("_seconds", 0.5)))
    points = [(phase, n) for phase in phases for n in range(1, census.counts.get(phase, 0) + 1)]
    strata = max(1, (kills + 1) // 2)
    stratum = (index // 2) % strata
    phase, n = points[min(len(points) - 1, int((stratum + rng.random()) * len(points) / strata))]
    return f"{phase}:{n}", None


@pytest.fixture
def world(tmp_path, tally_kind, zygote):  # tally_kind: in this process too (the unkilled runs)
    """Built envs and a store: env `up` climbs (kept), env `flat` does not (dropped)."""
    envs = tmp_path / "envs"
    scripts = {"up": RoundScript(notes_commands), "flat": RoundScript(lambda n: ["echo 1 > answer.txt"])}
    for env_id in scripts:
        make_tally_env(envs, env_id)
    with ScriptedServer(
        lambda request, i: scripts[CountingServer.env_of(request)](request, i), model="scripted-teacher"
    ) as server:
        spec = {"envs": [str(envs / e) for e in scripts], "store": str(tmp_path / "store"), "base_url": server.base_url,
                "samples": 5, "concurrency": 4, "teacher": TEACHER, "rollout": {"rounds": 3}}  # fmt: skip
        run_child(rollout_args(spec), tmp_path / "events.log", zygote=zygote)
    return tmp_path, envs, tmp_path / "store"


def test_select_survives_sigkill(world, capsys, zygote):
    tmp_path, envs, store = world
    select = ["select", "--store", store, "--envs", envs, "-c", "sandbox.backend=process", "--out"]
    cli(*select, tmp_path / "reference")
    reference = files_of(tmp_path / "reference")
    census = run_child(["cli", *map(str, select), str(tmp_path / "census")], tmp_path / "events.log", zygote=zygote)
    rng = random.Random(SEED + 2)
    kills, differing, damaged, uncovered, attempts = Counter(), [], 0, 0, 0
    for i in range(SELECTIONS):
        out = tmp_path / f"select-{i}"
        landed = 0
        # every other selection is killed twice before its re-run
        while landed < 1 + i % 2 and attempts < 4 * SELECTIONS:
            pause, delay = choose(census, ("regrade", "fs"), rng, attempts, 18)
            outcome = run_child(
                ["cli", *map(str, select), str(out)], tmp_path / "events.log", pause, delay, zygote=zygote
            )
            kills[outcome.where if outcome.killed else "finished first"] += 1
            landed, attempts = landed + outcome.killed, attempts + 1
        cli(*select, out)
        got = files_of(out)
        differing += [
            f"select-{i}/{name}"
            for name in ("selection.json", "kept.jsonl", "drops.md")
            if got.get(name) != reference[name]
        ]
        cache = [
            json.loads(line) for line in got["verdicts.jsonl"].decode(errors="replace").splitlines() if _is_json(line)
        ]
        damaged += sum(1 for line in got["verdicts.jsonl"].decode(errors="replace").splitlines() if not _is_json(line))
        uncovered += len({str(p) for p in store.glob("*/*.jsonl")} - {row["path"] for row in cache})
    show(capsys, "crash and resume: arex select", {
        "kills": (f"{sum(v for k, v in kills.items() if k != 'finished first')}"
                  f" ({', '.join(f'{k} {v}' for k, v in sorted(kills.items()))})"),
        "selections compared with an unkilled run": SELECTIONS, "outputs differing": len(differing),
        "damaged verdict-cache lines (skipped, re-judged)": damaged,
        "records without a cached verdict after the re-run": uncovered,
    })  # fmt: skip
    assert sum(v for k, v in kills.items() if k != "finished first") >= SELECTIONS
    assert differing == [] and uncovered == 0


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except ValueError:
        return False


def test_export_survives_sigkill(world, capsys, zygote):
    tmp_path, envs, store = world
    cli("select", "--store", store, "--envs", envs, "-c", "sandbox.backend=process", "--out", tmp_path / "selected")
    export = ["export", "--selection", str(tmp_path / "selected"), "--out"]
    cli(*export, tmp_path / "reference" / "dataset")
    reference = files_of(tmp_path / "reference" / "dataset")
    assert "README.md" in reference and any(name.endswith(".parquet") for name in reference)
    census = run_child(["cli", *export, str(tmp_path / "census" / "dataset")], tmp_path / "events.log", zygote=zygote)
    rng = random.Random(SEED + 3)
    target = tmp_path / "run" / "dataset"
    kills, states, differing, leftovers, attempts = Counter(), Counter(), [], [], 0
    while sum(v for k, v in kills.items() if k != "finished first") < EXPORT_KILLS and attempts < 3 * EXPORT_KILLS:
        existed = target.exists()
        pause, delay = choose(census, ("fs",), rng, attempts, 2 * EXPORT_KILLS)
        outcome = run_child(["cli", *export, str(target)], tmp_path / "events.log", pause, delay, zygote=zygote)
        kills[outcome.where if outcome.killed else "finished first"] += 1
        attempts += 1
        got = files_of(target)
        state = "complete" if got == reference else ("absent" if not target.exists() else "incomplete")
        states[f"{state}{' (an earlier export was there)' if existed and state != 'complete' else ''}"] += 1
        cli(*export, target)
        if files_of(target) != reference:
            differing.append(attempts)
        leftovers += [p.name for p in target.parent.iterdir() if p.name != "dataset"]
    show(capsys, "crash and resume: arex export", {
        "kills": (f"{sum(v for k, v in kills.items() if k != 'finished first')}"
                  f" ({', '.join(f'{k} {v}' for k, v in sorted(kills.items()))})"),
        "dataset right after a kill": ", ".join(f"{k} {v}" for k, v in sorted(states.items())),
        "re-runs differing from an unkilled run": len(differing),
        "staging folders left beside the dataset": len(leftovers),
    })  # fmt: skip
    assert sum(v for k, v in kills.items() if k != "finished first") >= EXPORT_KILLS
    # A killed export leaves the previous dataset whole, or (the first time) none at all.
    assert set(states) <= {"complete", "absent"}, states
    assert differing == [] and leftovers == []


def _verdict_lines(path: Path) -> int:
    """Complete, parseable lines of a verdict cache."""
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    return sum(1 for line in text.split("\n")[:-1] if _is_json(line))


def test_a_killed_select_keeps_every_verdict_it_finished(world, zygote):
    """Issue 31: verdicts were cached in file order behind the slowest re-grade, so a select killed
    while one re-grade hung kept none judged after it. One re-grade is held; every other verdict
    must reach the cache, survive the kill, and not be judged again on the re-run."""
    tmp_path, envs, store = world
    select = ["select", "--store", store, "--envs", envs, "-c", "sandbox.backend=process", "--out"]
    census = run_child(["cli", *map(str, select), str(tmp_path / "reference")], tmp_path / "events.log", zygote=zygote)
    reference = files_of(tmp_path / "reference")
    every = _verdict_lines(tmp_path / "reference" / "verdicts.jsonl")
    out = tmp_path / "held"

    def all_but_the_held_one_cached() -> bool:
        """all but the held trajectory's verdict reached the cache"""
        return _verdict_lines(out / "verdicts.jsonl") >= every - 1

    held = run_child(
        ["cli", *map(str, select), str(out)],
        tmp_path / "events.log",
        "regrade:1",
        zygote=zygote,
        until=all_but_the_held_one_cached,
        timeout=120,
    )
    assert held.killed and held.where == "regrade"
    assert _verdict_lines(out / "verdicts.jsonl") == every - 1
    rerun = run_child(["cli", *map(str, select), str(out)], tmp_path / "events.log", zygote=zygote)
    # the re-run re-grades the held trajectory's rounds only (first, best, final: 3 at most)
    assert 1 <= rerun.counts.get("regrade", 0) <= 3 < census.counts["regrade"], (rerun.counts, census.counts)
    got = files_of(out)
    assert [name for name in ("selection.json", "kept.jsonl", "drops.md") if got.get(name) != reference[name]] == []


def test_select_outputs_are_the_previous_ones_or_the_new_ones_after_a_kill_mid_write(world, zygote):
    """Issue 31: selection.json and drops.md were written in place, so a kill (or a full disk)
    mid-write left half a file where a whole one had been. Each text write of a re-run of a
    finished selection is cut in half and killed there; the outputs must be the finished ones."""
    tmp_path, envs, store = world
    out = tmp_path / "selected"
    select = ["cli", "select", "--store", str(store), "--envs", str(envs), "-c", "sandbox.backend=process", "--out"]
    run_child([*select, str(out)], tmp_path / "events.log", zygote=zygote)
    reference = files_of(out)
    census = run_child([*select, str(out)], tmp_path / "events.log", zygote=zygote)
    assert census.counts.get("wtext", 0) >= 2, census.counts  # selection.json and drops.md at least
    cut = []
    for n in range(1, census.counts["wtext"] + 1):
        outcome = run_child([*select, str(out)], tmp_path / "events.log", f"wtext:{n}", zygote=zygote)
        assert outcome.killed and outcome.where == "wtext"
        got = files_of(out)
        cut += [
            f"{name} (write {n})"
            for name in ("selection.json", "kept.jsonl", "drops.md")
            if got[name] != reference[name]
        ]
    assert cut == []


@pytest.mark.docker
def test_the_next_select_removes_the_sandboxes_a_killed_select_left(world, zygote):
    """Issue 31: a select killed while re-grading left its sandbox running, and the next select on
    the same --out did not remove it (only `arex rollout` did, for its store). The tally kind
    re-grades in a Docker sandbox here (tests/reliability_hooks.py), as judge and ML envs do."""
    import docker

    tmp_path, envs, store = world
    client = docker.from_env()
    out = tmp_path / "selected"
    select = ["cli", "select", "--store", str(store), "--envs", str(envs), "-c", "sandbox.backend=docker", "--out"]
    mine = lambda pid: client.containers.list(  # noqa: E731
        all=True, filters={"label": [f"arex.owner_pid={pid}"]}, ignore_removed=True
    )
    killed = run_child([*select, str(out)], tmp_path / "events.log", "regrade:2", zygote=zygote)
    try:
        assert killed.killed and mine(killed.pid)  # the kill left its re-grading sandboxes
        rerun = run_child([*select, str(out)], tmp_path / "events.log", zygote=zygote)
        assert mine(killed.pid) == [] and mine(rerun.pid) == []
        assert (out / "selection.json").is_file()
    finally:
        for container in mine(killed.pid):  # ours only, by owner pid
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
