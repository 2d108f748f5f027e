"""Attacks that beat an earlier arex, replayed against this one (docs/security.md, "How it is tested").

Each test mounts one attack the way a hostile agent would: through a real rollout with the scripted
teacher (the agent's commands run in a real sandbox, its workspace is archived and graded), or
through the judge and Sandbox APIs. Each asserts the attack now fails, in a way the earlier design
(host-side extraction of workspace copies, verdicts parsed from what the program printed, grading
containers carrying state, test data inside the grading container, disk on the container layer,
the submission read apart from the snapshot, selection trusting recorded scores) would not pass.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import tarfile
import uuid
from pathlib import Path

import pytest
from attack_payloads import (
    HUNTER_PY,
    INODE_FLOOD_PY,
    LEFTOVER_PY,
    LONG_PATH_PY,
    SEAL_PROBE_PY,
    STASH_PY,
    STATE_PROBE_PY,
    STOP_EVERYTHING_PY,
    crafted_tar_py,
    fanout_cpp,
    forger_py,
    includer_cpp,
    sealer_py,
)
from repo_paths import REPO
from solutions import EXACT_PY

from arex.envs.runtime import Env, load_env
from arex.grading.judge import Judge
from arex.grading.pool import GradingPool
from arex.record.snapshots import MemberError, SnapshotStore, read_member
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig, make_sandbox
from arex.sandbox.docker import docker_client
from arex.selection.selector import SelectConfig, select
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

ROOT = REPO
TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)
SHA_TAR = re.compile(r"[0-9a-f]{64}\.tar")
pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(bundled_envs) -> Env:
    """The bundled subset-fill judge env, built once for the test run (time limit 2 s, 1 sample, 8 hidden tests)."""
    built = load_env(bundled_envs / "subset-fill")
    assert built.spec.time_limit_s == 2.0 and built.submission_path == "solution.py"
    return built


def rollout(env: Env, commands, store: Path, rounds: int, script=None, **config):
    """A real rollout with the scripted teacher running `commands(round)`; (summary, record, path)."""
    script = script or RoundScript(commands)
    with ScriptedServer(script, model="scripted-teacher") as server:
        summary = asyncio.run(
            run_batch(
                [env], TEACHER, RolloutConfig(rounds=rounds, **config), SandboxConfig(), store, 1, 1, server.base_url
            )
        )
    [path] = sorted((store / env.id).glob("*.jsonl"))
    return summary, load(path), path


def snapshot_of(path: Path, end: dict) -> Path:
    return SnapshotStore(path.with_suffix("") / "snapshots").path(end.snapshot)


def observations(record) -> list[str]:
    return [step.observation or "" for round_ in record.rounds for step in round_.steps]


def write(name: str, text: str) -> str:
    """A command that writes `text` to `name` in the workspace (a quoted heredoc: no expansion)."""
    assert "ATTACK_EOF" not in text
    return f"cat > {name} <<'ATTACK_EOF'\n{text}\nATTACK_EOF"


def members(archive: Path) -> dict[str, tarfile.TarInfo]:
    """An archive's members by normalised name, read by the test without extracting anything."""
    with tarfile.open(archive, "r:") as tar:
        return {info.name.removeprefix("./"): info for info in tar.getmembers()}


def hidden_markers(env: Env) -> list[str]:
    """Strings that only a hidden test's input holds: each input's weights line, and every window of
    three consecutive weights in it (at least 14 characters: unambiguous)."""
    markers = []
    for test in env.spec.tests:
        if test.sample:
            continue
        lines = (env.dir / "private" / test.input).read_text().split("\n")
        weights = lines[1].split()
        assert len(weights) >= 5, test.name
        markers.append(lines[1].strip())
        markers += [" ".join(weights[i : i + 3]) for i in range(len(weights) - 2)]
    markers = [m for m in markers if len(m) >= 14]
    assert len(markers) > 50
    return markers


def leaked(text: str, markers: list[str]) -> list[str]:
    return [m for m in markers if m in text]


# -- 1. host file writes through the workspace snapshot --------------------------------------------
def test_links_and_crafted_tars_in_the_workspace_write_nothing_on_the_host(env, tmp_path):
    host_dir = Path(f"/tmp/arex-attack-{uuid.uuid4().hex}")  # the host's /tmp, outside every store
    host_file = host_dir / "pwned.txt"
    missing_dir = tmp_path / "host-target"  # next to the store
    existing_dir = tmp_path / "existing"  # a host folder that exists, to write beneath
    existing_dir.mkdir()
    watched = [host_dir, missing_dir]
    assert not any(p.exists() for p in watched) and list(existing_dir.iterdir()) == []

    def commands(n):
        if n == 1:
            return [
                # an absolute link to a host path, written through inside the sandbox
                (
                    f"mkdir -p {host_dir} {missing_dir} {existing_dir} && ln -s {host_file} abs_link"
                    " && echo pwned > abs_link && cat abs_link"
                ),
                # links to host folders, with files beneath them
                (
                    f"ln -s {missing_dir} dir_link && echo pwned > dir_link/under-link.txt"
                    f" && ln -s {existing_dir} existing_link && echo pwned > existing_link/under-existing.txt && ls -la"
                ),
                # a crafted tar in the workspace (absolute, .., symlink-then-member, hard link)
                write("craft.py", crafted_tar_py(str(host_file), str(existing_dir))) + "\npython3 craft.py",
                # the serving processes: replace, forge a reply, kill, stop
                (
                    "cp /bin/true /.arex/server.py; echo x > /.arex/arex-run;"
                    ' echo \'{"id": "x", "exit_code": 0}\' > /proc/1/fd/1; kill -9 1; echo attempts-done'
                ),
                (
                    "for p in 'serve[r].py' 'ini[t].py' 'arex-ru[n]';"
                    ' do pkill -9 -f "$p"; pkill -STOP -f "$p"; done; echo pkill-done'
                ),
                write("stop.py", STOP_EVERYTHING_PY) + "\npython3 stop.py",
                "kill -9 -1",  # every process the user may signal (the kernel spares only the caller)
                "echo still-served && readlink abs_link",
            ]
        return ["readlink abs_link dir_link", write("solution.py", EXACT_PY)]

    store = tmp_path / "store"
    _, record, path = rollout(env, commands, store, rounds=2)

    assert record.end.status == "done" and [r.number for r in record.rounds] == [1, 2], record.end
    seen = observations(record)
    assert "pwned" in seen[0] and "evil.tar written" in seen[2]  # the attacks did run in the sandbox
    assert "still-served" in seen[7] and str(host_file) in seen[7]  # the server outlived kill/stop
    assert "Read-only file system" in seen[3] and "Permission denied" in seen[3] and "attempts-done" in seen[3]
    assert seen[4].count("Operation not permitted") >= 6 and "pkill-done" in seen[4]  # server, init, runner: twice each
    stopped = seen[5].split("SIGSTOP", 1)[1]
    assert "Operation not permitted" in stopped and "'stopped'" not in stopped  # every other process is out of reach
    assert record.rounds[1].held_out == 1.0  # grading works after all of it

    # Nothing appeared on the host where the agent aimed.
    assert not any(p.exists() or p.is_symlink() for p in watched), [p for p in watched if p.exists()]
    assert list(existing_dir.iterdir()) == []
    # The store holds only the record, the summary and content-addressed archives; no link at all.
    found = []
    for folder, dirs, files in os.walk(store):
        for name in dirs + files:
            entry = Path(folder, name)
            assert not entry.is_symlink(), entry
            if entry.is_file():
                found.append(entry.relative_to(store).as_posix())
    key = path.stem
    for rel in found:
        assert rel in ("summary.json", f"{env.id}/{key}.jsonl") or (
            rel.startswith(f"{env.id}/{key}/snapshots/") and SHA_TAR.fullmatch(rel.rsplit("/", 1)[1])
        ), rel

    # The round's archive keeps the links as links, and the crafted tar as a plain file.
    archive = snapshot_of(path, record.rounds[0].end)
    entries = members(archive)
    assert entries["abs_link"].issym() and entries["abs_link"].linkname == str(host_file)
    assert entries["dir_link"].issym() and entries["dir_link"].linkname == str(missing_dir)
    assert entries["existing_link"].issym() and entries["existing_link"].linkname == str(existing_dir)
    assert entries["evil.tar"].isreg() and not any(name.startswith(("dir_link/", "existing_link/")) for name in entries)
    with pytest.raises(MemberError, match="symbolic link"):
        read_member(archive, "abs_link", 1 << 20)  # the host reader reports a link, never follows it
    with pytest.raises(MemberError, match="lies under"):
        read_member(archive, "existing_link/under-existing.txt", 1 << 20)
    # Restoring it (as on resume) unpacks inside a sandbox, so still nothing reaches the host.
    with make_sandbox(SandboxConfig(), "attack-restore") as box:
        box.restore(archive, box.config.workdir)
        inside = box.exec("readlink abs_link && tar -xf evil.tar 2>&1; ls -la")
        assert str(host_file) in inside.stdout and "evil.tar" in inside.stdout
    assert not any(p.exists() or p.is_symlink() for p in watched) and list(existing_dir.iterdir()) == []


# -- 2. forged CPU time and verdict ----------------------------------------------------------------
def test_cpu_burned_past_the_limit_is_tle_whatever_the_program_prints(env):
    limit = env.spec.time_limit_s
    honest = env.judge().grade(forger_py(0.0), "python3")
    assert honest.held_out_score == 1.0, honest.feedback  # the same program, without the burn, is right

    # The fan-out variant on a subset of the tests (the sample and 3 hidden ones), to save time.
    subset = env.spec.model_copy(
        update={
            "tests": tuple([t for t in env.spec.tests if t.sample] + [t for t in env.spec.tests if not t.sample][:3])
        }
    )
    results = {
        "single process, SIGXCPU ignored": env.judge().grade(forger_py(limit + 0.3), "python3"),
        "three processes, each under the limit": Judge(env.dir, subset, env.judge().sandbox_config).grade(
            fanout_cpp(0.4 * limit), "cpp17"
        ),
    }
    for name, result in results.items():
        assert result.infra_error is None, (name, result.infra_error)
        hidden = [t for t in result.details["tests"] if not t["sample"]]
        assert hidden and all(t["verdict"] == "TLE" for t in hidden), (
            name,
            [(t["verdict"], t["time_s"], t["message"]) for t in hidden],
        )
        # The time recorded is the kernel's CPU time of the whole tree, over the limit; only a host
        # too busy to give the program its CPU within the wall-clock backstop may stop it sooner.
        by_cpu = [t for t in result.details["tests"] if "wall-clock" not in t["message"]]
        assert by_cpu and all(t["time_s"] >= limit for t in by_cpu), (
            name,
            [(t["time_s"], t["message"]) for t in result.details["tests"]],
        )
        assert result.held_out_score == 0.0 and result.public_score == 0.0, name
        assert "cpu_us=1" not in json.dumps(result.details)  # the forged line is neither evidence nor kept
        assert all(f"over the {limit:g}s limit" in t["message"] for t in by_cpu)


# -- 3. state left in a reused grading container ---------------------------------------------------
def test_nothing_of_one_grading_survives_into_the_next_in_the_same_container(env):
    """Two gradings in turn in one pooled grading container (a pool of one: the second lease is the
    first container, cleaned and checked after the attack)."""
    pool = GradingPool(env.judge(), cap=1)
    try:
        with pool.lease() as lease:
            box = lease.box
            first = pool.judge.grade(LEFTOVER_PY, "python3", samples_only=True, box=box)
        [sample] = first.details["tests"]
        assert sample["verdict"] == "RE" and "LEFTOVERS STARTED" in sample["message"], sample
        started = dict(re.findall(r"(processes|files)=(\d+)", sample["message"]))
        # the attack set up its state
        assert int(started["processes"]) >= 4 and int(started["files"]) >= 10, sample["message"]

        with pool.lease() as lease:
            assert lease.box is box  # the same container, reused after its check
            second = pool.judge.grade(STATE_PROBE_PY, "python3", samples_only=True, box=lease.box)
        [probe] = second.details["tests"]
        # no process, file or IPC object of the first
        assert probe["verdict"] == "AC" and second.public_score == 1.0, probe["message"]
        assert pool.replaced == 0, pool.failures  # cleaned, not thrown away
    finally:
        pool.close()


def test_a_binary_larger_than_the_memory_limit_is_mle_not_an_infrastructure_failure(env):
    """The compiled program's files live in the grading container's memory: a 100 MB initialised
    array makes the kernel refuse the tighter run limit. Graded MLE; the container is reused."""
    small = Judge(env.dir, env.spec.model_copy(update={"memory_mb": 64}), env.judge().sandbox_config)
    huge = '#include <cstdio>\nchar big[100 << 20] = {1};\nint main() { printf("%d\\n", big[12345]); }\n'
    pool = GradingPool(small, cap=1)
    try:
        with pool.lease() as lease:
            box = lease.box
            result = small.grade(huge, "cpp17", box=box)
        assert result.infra_error is None
        assert {t["verdict"] for t in result.details["tests"]} == {"MLE"}, result.details["tests"][0]
        assert result.held_out_score == 0.0 and "64 MB" in result.details["tests"][0]["message"]
        with pool.lease() as lease:  # the same container grades the next one, once cleaned
            assert lease.box is box
            honest = small.grade(EXACT_PY, "python3", box=lease.box)
        assert honest.held_out_score == 1.0, honest.feedback
    finally:
        pool.close()


# -- 4. hidden inputs ------------------------------------------------------------------------------
def test_hidden_inputs_reach_neither_the_grade_nor_the_record(env, tmp_path):
    markers = hidden_markers(env)
    [canary] = [line.strip() for line in (env.dir / "private" / "canary.txt").read_text().splitlines() if line.strip()]
    names = [t.input.rsplit("/", 1)[-1] for t in env.spec.tests if not t.sample]

    # A C++ submission that includes whichever hidden input path exists at compile time.
    included = env.judge().grade(includer_cpp(names), "cpp17")
    assert "includer: no hidden input found" in included.feedback, included.feedback[:500]
    assert leaked(included.feedback + json.dumps(included.details), markers) == []

    # The agent hunts in its own sandbox, then submits a program that hunts in the grading container.
    def commands(n):
        return [
            (
                r"find / \( -path /proc -o -path /sys \) -prune"
                r" -o \( -name '*.in' -o -name '*.ans' -o -name 'canary*' -o -name 'private' \)"
                r" -print 2>/dev/null | head -50"
            ),
            "ls -la / /judge /.arex /skills 2>&1 | head -60; env | sort",
            (
                r"grep -rIl -E '^[0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+'"
                r" /tmp /home /opt /srv /mnt /var /run /workspace /judge /data 2>/dev/null | head"
            ),
            write("solution.py", HUNTER_PY),
        ]

    # The hunt reads much of the image's files; on a cold page cache (a fresh machine, the first
    # test to read them) it waits on the disk past the run's wall-clock limit, which is a TLE, not
    # the hunt. The same walk once in a sandbox of the grading image, unlimited, warms the cache.
    with make_sandbox(env.judge().sandbox_config, "hunt-warm-up") as box:
        warm = box.exec(["python3", "-c", HUNTER_PY], stdin="4 10\n6 5 5 3\n", timeout=600)
    assert "HUNT DONE" in warm.stderr, warm

    _, record, path = rollout(env, commands, tmp_path / "store", rounds=1)
    assert record.end.status == "done"
    grade = record.rounds[0].end.grade
    sample = next(t for t in grade.details["tests"] if t["sample"])
    assert sample["verdict"] == "RE" and "HUNT DONE" in sample["message"], sample  # the hunt ran, to the end
    read_count = int(re.search(r"read=(\d+)", sample["message"]).group(1))
    assert read_count > 20, sample["message"]
    hidden = [t for t in grade.details["tests"] if not t["sample"]]
    assert {t["verdict"] for t in hidden} <= {"RE", "WA"} and all(
        t["message"] in ("", "exit code 1") for t in hidden
    ), hidden

    text = path.read_text()
    assert leaked(text, markers) == [], leaked(text, markers)[:3]
    assert canary not in text
    for archive in (path.with_suffix("") / "snapshots").glob("*.tar"):
        assert leaked(archive.read_bytes().decode("latin-1"), markers) == []


# -- 5. disk ---------------------------------------------------------------------------------------
def test_filling_the_disk_fails_in_the_sandbox_and_takes_nothing_from_the_host(env, tmp_path):
    docker_fs = "/var/lib/docker" if Path("/var/lib/docker").is_dir() else "/"
    before = shutil.disk_usage(docker_fs).free
    lowest = [before]
    flood = "dd if=/dev/zero of={} bs=1M count=1024 status=none; echo dd-exit=$?; ls -la {}"

    def commands(n):
        if n == 1:
            return [
                write("flood.py", INODE_FLOOD_PY) + "\npython3 flood.py",  # 300k small files
                *(flood.format(f"big{i}", f"big{i}") for i in (1, 2, 3)),  # 3 x 1 GB files
                "ls -la; df -k .",
            ]
        return ["rm -f big1 big2 big3 && echo cleaned", "python3 solution.py <<< '4 10\n6 5 5 3'"]

    script = RoundScript(commands)

    def measuring(request, index):  # at every teacher call, i.e. right after each command
        lowest[0] = min(lowest[0], shutil.disk_usage(docker_fs).free)
        return script(request, index)

    _, record, _ = rollout(env, None, tmp_path / "store", rounds=2, script=measuring)
    lowest[0] = min(lowest[0], shutil.disk_usage(docker_fs).free)

    assert record.end.status == "done" and [r.number for r in record.rounds] == [1, 2], record.end
    steps = record.rounds[0].steps
    inode_flood = steps[0].observation
    assert "No space left on device" in inode_flood and int(re.search(r"made (\d+)", inode_flood).group(1)) < 300_000, (
        inode_flood
    )
    listed = [line.split() for s in steps for line in (s.observation or "").splitlines() if re.search(r" big\d$", line)]
    assert all(int(fields[4]) < 1 << 30 for fields in listed), listed  # no file got its gigabyte
    assert before - lowest[0] < 700 << 20, f"the host's free disk dropped by {(before - lowest[0]) >> 20} MB"
    for step in steps[1:4]:  # each write fails, and says why
        assert "dd-exit=0" not in step.observation, step.observation
        assert re.search(r"No space left on device|quota", step.observation), (step.exec, step.observation)
    # Round 1 was archived and graded, or refused with the reason; round 2 cleans up and is graded as usual.
    first = record.rounds[0].end
    assert first.snapshot is not None or (first.grade.held_out_score == 0.0 and "not graded" in first.feedback), (
        first.feedback
    )
    assert "cleaned" in record.rounds[1].steps[0].observation, record.rounds[1].steps[0]
    assert record.rounds[1].held_out > 0.5, record.rounds[1].end.feedback


# -- 6. ordinary actions do not end a rollout ------------------------------------------------------
def test_ordinary_workspace_contents_never_end_a_rollout(env, tmp_path):
    def commands(n):
        if n == 1:
            return [
                "python3 -m venv venv && readlink venv/bin/python3",
                (
                    "ln -s /usr/bin/python3 abs_py && ln -s /nonexistent/x dangling && mkfifo fifo"
                    " && ln -s loop_a loop_b && ln -s loop_b loop_a && "
                    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && ls -la"
                ),
                write("deep.py", LONG_PATH_PY) + "\npython3 deep.py",
                (
                    "mkdir data && head -c 5M /dev/urandom > data/blob"
                    " && for i in $(seq 1 20); do ln -s data link$i; done && du -shL link1"
                ),
            ]
        if n == 2:
            return ["cp solution.py keep.py && rm solution.py && mkdir solution.py && cp keep.py solution.py/main.py"]
        if n == 3:
            return ["rm -rf solution.py && ln -s keep.py solution.py"]
        return ["rm solution.py && mv keep.py solution.py"]

    _, record, path = rollout(env, commands, tmp_path / "store", rounds=4)

    assert record.end.status == "done" and [r.number for r in record.rounds] == [1, 2, 3, 4], record.end
    ends = [r.end for r in record.rounds]
    scores = [e.grade.held_out_score for e in ends]
    assert scores[0] > 0.5 and scores[3] == scores[0], scores  # the starter, before and after
    assert scores[1] == 0.0 and "solution.py" in ends[1].feedback and "folder" in ends[1].feedback, ends[1].feedback
    assert scores[2] == 0.0 and "solution.py" in ends[2].feedback and "symbolic link" in ends[2].feedback, ends[
        2
    ].feedback
    assert all(e.snapshot is not None for e in ends)

    entries = members(snapshot_of(path, ends[0]))
    assert entries["venv/bin/python3"].issym() and entries["abs_py"].linkname == "/usr/bin/python3"
    assert entries["fifo"].isfifo() and entries["loop_a"].issym() and entries["loop_b"].linkname == "loop_a"
    assert any(len(name) > 4096 and name.endswith("deep.txt") for name in entries)  # longer than PATH_MAX
    assert all(entries[f"link{i}"].issym() and entries[f"link{i}"].linkname == "data" for i in range(1, 21))
    assert not any(name.startswith("link") and "/" in name for name in entries)  # not followed
    blob = entries["data/blob"].size
    assert blob == 5 << 20
    kept = list((path.with_suffix("") / "snapshots").iterdir())
    assert snapshot_of(path, ends[0]) in kept and snapshot_of(path, ends[-1]) in kept
    for archive in kept:  # ~5 MB of data plus the venv (~25 MB), not 21 copies of the data
        assert archive.stat().st_size < blob + (45 << 20), (archive, archive.stat().st_size)
    assert sum(info.size for info in entries.values() if info.isreg()) < blob + (40 << 20)


# -- 7. the submission swapped while the round ends -------------------------------------------------
def test_a_swapped_submission_is_graded_as_recorded_and_archived(env, tmp_path):
    swapper = (
        "(setsid bash -c 'while :; do cp good.py s.tmp && mv -f s.tmp solution.py;"
        " cp bad.py s.tmp && mv -f s.tmp solution.py; done' "
        "</dev/null >/dev/null 2>&1 &)"
    )

    # Samples the file until two different contents have been seen (polled, with a deadline of
    # 3000 samples): a busy machine may be slow to swap it, but the swap is seen; prints the count.
    seen_two = (
        's=; for i in $(seq 3000); do s=$(printf \'%s\\n\' "$s" "$(md5sum < solution.py)" | grep . | sort -u); '
        "[ $(printf '%s\\n' \"$s\" | wc -l) -ge 2 ] && break; sleep 0.01; done; printf '%s\\n' \"$s\" | wc -l"
    )

    def commands(n):
        if n == 1:
            return [write("good.py", EXACT_PY), write("bad.py", "print(1)\nprint(1)"), swapper, seen_two]
        return [seen_two]

    _, record, path = rollout(env, commands, tmp_path / "store", rounds=2)

    assert record.end.status == "done" and len(record.rounds) == 2
    distinct = [int(re.findall(r"^(\d+)$", r.steps[-2].observation, re.MULTILINE)[-1]) for r in record.rounds]
    assert all(d >= 2 for d in distinct), distinct  # the file really was changing under the round
    regraded: dict[str, float] = {}
    for round_ in record.rounds:
        end = round_.end
        archived = read_member(snapshot_of(path, end), "solution.py", 1 << 20).decode()
        assert end.submission == archived  # what is recorded is what is archived
        if archived not in regraded:
            regraded[archived] = env.judge().grade(archived, "python3").held_out_score
        assert end.grade.held_out_score == regraded[archived]  # and what was graded


# -- 8. selection over a store with a corrupt archive and an edited first score ----------------------
def test_select_drops_a_corrupt_archive_and_an_edited_first_score(env, tmp_path):
    def commands(n):
        return ["head -3 solution.py"] if n == 1 else [write("solution.py", EXACT_PY)]

    _, record, path = rollout(env, commands, tmp_path / "run", rounds=2)
    assert record.end.status == "done"
    first = record.rounds[0].held_out
    assert 0.5 < first < 1.0 == record.rounds[1].held_out

    store = tmp_path / "store"

    def copy(name: str, edit=None) -> Path:
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for line in lines:
            if line["type"] == "header":
                line["key"] = name
            if edit:
                edit(line)
        target = store / env.id / f"{name}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(line) + "\n" for line in lines))
        shutil.copytree(path.with_suffix(""), target.with_suffix(""))
        return target

    copy("good")
    corrupt = copy("corrupt")
    last = snapshot_of(corrupt, record.rounds[-1].end)
    with tarfile.open(last, "r:") as tar:
        cut = max(info.offset_data + info.size // 2 for info in tar.getmembers() if info.isreg() and info.size)
    last.write_bytes(last.read_bytes()[:cut])  # cut in the middle of the submission's bytes

    def lower_first(line):
        if line["type"] == "round_end" and line["round"] == 1:
            line["grade"]["held_out_score"] = 0.25  # a better-looking improvement

    copy("edited-first", lower_first)

    selection = select(store, env.dir.parent, tmp_path / "sel", SelectConfig(), SandboxConfig())

    assert [v.key for v in selection.kept] == ["good"], [(v.key, v.details) for v in selection.dropped]
    dropped = {v.key: v for v in selection.dropped}
    assert set(dropped) == {"corrupt", "edited-first"}
    assert "bad_snapshot" in dropped["corrupt"].reasons and "round 2" in dropped["corrupt"].details["bad_snapshot"]
    edited = dropped["edited-first"]
    assert edited.reasons == ["not_reproducible"], edited.details
    assert "round 1: recorded held-out 0.25" in edited.details["not_reproducible"]
    assert edited.scores["regraded_first"] == pytest.approx(first, abs=1e-9) and edited.scores["first"] == 0.25
    report = json.loads((tmp_path / "sel" / "selection.json").read_text())
    assert report["kept"] == 1 and report["dropped"] == 2


# -- 9. one grading's hidden runs stash what they read for a later run the agent sees -------------
def test_hidden_inputs_stashed_in_one_grading_never_reach_a_sample_run(env, tmp_path):
    """Each run appends its input to files in every writable place and prints what they hold on
    stderr: a sample run after the hidden ones printed their inputs into the feedback (four rounds
    gave all eight). Samples now run first in every grading; the container is wiped between them."""
    markers = hidden_markers(env)

    def commands(n):
        return [write("solution.py", STASH_PY)]

    _, record, path = rollout(env, commands, tmp_path / "store", rounds=2)
    assert record.end.status == "done"
    for round_ in record.rounds:
        grade = round_.end.grade
        sample = next(t for t in grade.details["tests"] if t["sample"])
        assert sample["verdict"] == "RE" and "STASH runs=1 " in sample["message"], sample  # it ran, and ran first
        assert [t["name"] for t in grade.details["tests"]] == [t.name for t in env.spec.tests]  # reported in spec order
    text = path.read_text()
    assert leaked(text, markers) == [], leaked(text, markers)[:3]

    selection = select(tmp_path / "store", env.dir.parent, tmp_path / "sel", SelectConfig(), SandboxConfig())
    verdicts = selection.kept + selection.dropped
    assert len(verdicts) == 1 and "hidden_content" not in verdicts[0].reasons, verdicts[0].details


def test_a_record_holding_hidden_content_in_any_form_is_dropped_at_selection(env, tmp_path):
    """The net under the isolation: a record that holds a hidden input, however re-encoded (here a
    teacher that knows one and writes it base64-encoded in its reflection, reversed in a command),
    is dropped by `arex select` with its own reason, naming where."""
    hidden = next(t for t in env.spec.tests if not t.sample)
    line = (env.dir / "private" / hidden.input).read_text().split("\n")[1].strip()
    encoded = base64.b64encode(line.encode()).decode()

    def commands(n):
        return [f"echo '{line[::-1]}' > /dev/null", write("solution.py", EXACT_PY)]

    def reflection(n):
        return f"REVIEW: graded.\nDIAGNOSE: the hidden case was {encoded}.\nPLAN: hard-code it.\nSTATE: round {n} done."

    _, record, path = rollout(env, commands, tmp_path / "store", rounds=1, script=RoundScript(commands, reflection))
    assert record.end.status == "done" and record.rounds[0].held_out == 1.0
    selection = select(
        tmp_path / "store", env.dir.parent, tmp_path / "sel", SelectConfig(min_improvement=None), SandboxConfig()
    )
    [verdict] = selection.dropped
    assert "hidden_content" in verdict.reasons, verdict.details
    detail = verdict.details["hidden_content"]
    # the first place it is (steps count from 0), and how
    assert "round 1 step 0 reply" in detail and "reversed" in detail, detail
    assert "hidden_content" in (tmp_path / "sel" / "drops.md").read_text()


# -- 10. a pooled grading container sealed by the grading before ----------------------------------
def test_a_sealed_grading_container_is_restored_or_replaced_never_handed_on(env):
    """The submission chmods its own tmpfs roots 0555 over 0444 notes and 240 MB of ballast, and
    tags the roots with an extended attribute: an unprivileged cleaner could remove none of it, the
    next grading could not write its source, and an honest program was MLE on every test."""
    pool = GradingPool(env.judge(), cap=1)
    try:
        with pool.lease() as lease:
            box = lease.box
            sealed = pool.judge.grade(sealer_py(240), "python3", samples_only=True, box=box)
        [sample] = sealed.details["tests"]
        assert sample["verdict"] == "RE" and "SEALED /tmp /home/arex /workspace" in sample["message"], sample
        with pool.lease() as lease:
            assert lease.box is box  # the same container, cleaned and checked
            probe = pool.judge.grade(SEAL_PROBE_PY, "python3", box=lease.box)
        assert probe.held_out_score == 1.0 and probe.public_score == 1.0, probe.feedback
        assert {t["verdict"] for t in probe.details["tests"]} == {"AC"}
        assert pool.replaced == 0, pool.failures  # restored, not thrown away
    finally:
        pool.close()


def test_two_rollouts_sharing_a_grading_container_pass_nothing_to_each_other(env, tmp_path):
    """Two rollouts of one env, one grading container between them: each seals it in round 1
    and probes it in round 2. Neither is hurt by the other's leftovers, and no grading fails."""

    def commands(n):
        return [write("solution.py", sealer_py(120) if n == 1 else SEAL_PROBE_PY)]

    store = tmp_path / "store"
    with ScriptedServer(RoundScript(commands), model="scripted-teacher") as server:
        config = RolloutConfig(rounds=2, grading_containers=1)
        summary = asyncio.run(run_batch([env], TEACHER, config, SandboxConfig(), store, 2, 2, server.base_url))
    paths = sorted((store / env.id).glob("*.jsonl"))
    assert len(paths) == 2, summary
    for path in paths:
        record = load(path)
        assert record.end.status == "done", record.end
        assert [r.held_out for r in record.rounds] == [0.0, 1.0], [r.end.feedback for r in record.rounds]


def test_a_container_that_fails_a_grading_is_replaced_and_the_grading_repeated(env):
    """The grading container dies under a grading (its engine removed it): the pool grades the
    submission again in another container; the failure is neither its verdict nor the rollout's end."""
    pool = GradingPool(env.judge(), cap=1)
    boxes = []

    def run(lease):
        boxes.append(lease.box)
        if len(boxes) == 1:
            docker_client().containers.get(lease.box.id).remove(force=True)  # the engine's side: gone mid-grading
        return pool.judge.grade(EXACT_PY, "python3", box=lease.box, checker_box=lease.checker)

    try:
        result = pool.grade(run)
        assert result.held_out_score == 1.0 and result.infra_error is None, result.feedback
        assert len(boxes) == 2 and boxes[0] is not boxes[1]
        assert pool.settle() and pool.replaced == 1 and "failed in it" in pool.failures[0], pool.failures
    finally:
        pool.close()
