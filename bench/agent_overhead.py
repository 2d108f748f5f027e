"""Agent overhead: the host CPU an agent engine spends per step, arex against mini-swe-agent
(PyPI `mini-swe-agent` 2.x), side by side in one run.

Run: python bench/agent_overhead.py   (B_N=20 B_ROUNDS=1 for a quicker look)
Both sides take the same scripted steps from the same scripted OpenAI-compatible server (this
process; B_LAT, default 50 ms, per reply) in the same image (the image arex gives a judge env's
agent: arex-base:latest with the offline docs layer): a cycle of `echo ... >> notes.txt`,
`cat notes.txt`, `ls -la`, each reply in the agent's own action format (arex: ```bash; mini:
```mswea_bash_command), then the agent's submit.
arex: `arex rollout`'s batch runner (run_batch: one rollout of one round, Rollout.run's loop, the
      bundled prompts, the record written as it goes) with its sandbox: one container whose command
      server takes each command over the attached stream.
mini: DefaultAgent + LitellmTextbasedModel + DockerEnvironment as its mini_textbased config sets
      them (`docker exec` per command; trajectory saved per step), run by bench/_mini_driver.py in
      the bench's own virtualenv (bench/.venv-mini, made on the first run: mini-swe-agent is never a
      dependency of arex).
Each agent runs in its own process. Only steps are measured, never container start or stop: the
server samples when request W and request W+N arrive (W = 5 warm-up steps), so the window holds
exactly N steps: N replies, N commands, N observations recorded. Before the first sample it holds
reply W until the side is quiet (same containers, under 10 ms CPU per 200 ms, twice): the agent
waits on that reply, so what still runs then is start-up (arex warms its grading container in the
background during the first steps), and it stays out of the window.
CPU in the window = the agent process with its reaped children (utime+stime+cutime+cstime from
/proc/<pid>/stat, what getrusage reports; mini's `docker` CLI runs are its children) + dockerd +
containerd + the side's containerd shims (with the runc runs they reap) + the side's containers'
cgroups (arex's in-box command server and runner; mini's `bash -lc`; both sides' commands). The
teacher's latency costs no CPU.
dockerd and containerd are shared with anything else on the host, so each side runs B_ROUNDS
(3) times, alternating, and keeps its lowest-CPU run. ratio = arex CPU ms per step / mini's;
wall figures are per step beyond the teacher's latency. Target: ratio <= 0.5.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import docker
from _common import ROOT, cgroup_cpu, proc_cpu, tiny_env

from arex.envs.docs_index import agent_image
from arex.envs.runtime import load_env
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import Reply, ScriptedServer

STEPS, ROUNDS, LATENCY = (
    int(os.environ.get("B_N", 40)),
    int(os.environ.get("B_ROUNDS", 3)),
    float(os.environ.get("B_LAT", 0.05)),
)
WARMUP = 5
MODEL = "scripted-teacher"
MINI = "mini-swe-agent>=2,<3"
VENV = ROOT / "bench" / ".venv-mini"
REFLECT = "Reflect, then write your state update"  # arex's reflection request (bundled prompts)
DAEMONS = ("dockerd", "containerd")


def command(i: int) -> str:
    return (f"echo 'step {i}: nothing to see' >> notes.txt", "cat notes.txt", "ls -la")[i % 3]


@dataclass(frozen=True)
class Side:
    name: str
    fence: str
    submit: str
    label: Callable[[int, str], str]
    """The docker label of this side's containers, from the agent process's pid and a run token."""
    launch: Callable[[str, Path, Path, str], tuple[list, dict]]
    """(argv, environment) of the agent's process, from the server's URL, the env folder, a work
    folder and the run token."""


@dataclass
class Sample:
    wall: float
    agent: float
    engine: float
    box: float


@dataclass
class Run:
    wall_s: float = 0.0
    agent_s: float = 0.0
    engine_s: float = 0.0
    box_s: float = 0.0
    containers: int = 0
    info: dict = field(default_factory=dict)

    @property
    def cpu_ms(self) -> float:
        return (self.agent_s + self.engine_s + self.box_s) / STEPS * 1000

    @property
    def wall_ms(self) -> float:
        return (self.wall_s / STEPS - LATENCY) * 1000


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cgroup_cpu(container_id: str) -> float:
    seconds = cgroup_cpu(container_id)
    if seconds is None:
        raise SystemExit(
            f"bench/agent_overhead.py: no CPU accounting found for container {container_id[:12]} under /sys/fs/cgroup"
        )
    return seconds


def _daemon_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() in DAEMONS:
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


class Probe:
    """What to sample for one side: found at the window's start (the docker calls that finds it
    happen before the first sample), read again at its end without asking the engine anything."""

    def __init__(self, side: Side, token: str):
        self.side, self.token = side, token
        self.pid = 0
        self.containers: list[str] = []
        self.pids: list[int] = []
        self.start: Sample | None = None
        self.end: Sample | None = None
        self.settled = False
        self.client = docker.from_env()

    def find(self) -> None:
        label = self.side.label(self.pid, self.token)
        found = self.client.containers.list(filters={"label": label})
        self.containers = [c.id for c in found]
        shims = [_ppid(c.attrs["State"]["Pid"]) for c in found]
        self.pids = [self.pid, *_daemon_pids(), *shims]

    def settle(self, deadline_s: float = 30.0) -> bool:
        """Wait until the side does no work of its own: the agent is blocked on this reply, so CPU
        that it or its containers spend now is start-up (arex starts its grading container while
        the first steps run), which the window must not hold. Quiet = the same containers and under
        10 ms of CPU per 200 ms, twice in a row; False if that never came."""
        last, quiet, end = None, 0, time.monotonic() + deadline_s
        while quiet < 2:
            if time.monotonic() > end:
                return False
            self.find()
            now = (self.containers, proc_cpu(self.pid) + sum(_cgroup_cpu(c) for c in self.containers))
            quiet = quiet + 1 if last is not None and now[0] == last[0] and now[1] - last[1] < 0.01 else 0
            last = now
            time.sleep(0.2)
        return True

    def sample(self) -> Sample:
        engine = sum(proc_cpu(pid) for pid in self.pids[1:])
        return Sample(time.perf_counter(), proc_cpu(self.pid), engine, sum(_cgroup_cpu(c) for c in self.containers))

    def run(self, info: dict) -> Run:
        if self.start is None or self.end is None:
            raise SystemExit(
                f"bench/agent_overhead.py: the {self.side.name} side ended before step {WARMUP + STEPS}: {info}"
            )
        a, b = self.start, self.end
        return Run(
            b.wall - a.wall,
            b.agent - a.agent,
            b.engine - a.engine,
            b.box - a.box,
            len(self.containers),
            {**info, "settled": self.settled},
        )


class Script:
    """The scripted teacher: a command per request, the submit after WARMUP + STEPS, a reflection
    when arex asks for one; samples the probe when the window opens and closes."""

    def __init__(self, side: Side, probe: Probe):
        self.side, self.probe = side, probe

    def __call__(self, request: dict, index: int) -> Reply:
        messages = request.get("messages") or [{}]
        if REFLECT in str(messages[-1].get("content")):
            return Reply("REVIEW: fine.\nDIAGNOSE: nothing.\nPLAN: stop.\nSTATE: notes.txt holds the steps.")
        if index == WARMUP:
            self.probe.settled = self.probe.settle()
            self.probe.start = self.probe.sample()
        elif index == WARMUP + STEPS:
            self.probe.end = self.probe.sample()
        action = command(index) if index < WARMUP + STEPS else self.side.submit
        return Reply(f"THOUGHT: step {index}.\n\n```{self.side.fence}\n{action}\n```")


# -- the two agents, each in its own process --------------------------------------------------
async def arex_driver(env_dir: str, base_url: str, out: str) -> dict:
    """arex's side: `arex rollout`'s batch runner with one rollout of one round."""
    teacher = TeacherConfig(model=MODEL, track_cost=False)
    rollout = RolloutConfig(rounds=1, steps_per_round=WARMUP + STEPS + 1)
    summary = await run_batch(
        [load_env(Path(env_dir))], teacher, rollout, SandboxConfig(), Path(out) / "store", 1, 1, base_url
    )
    [result] = summary["results"]
    end = load(Path(result["path"])).end
    return {
        "ok": end is not None and end.status == "done" and end.rounds == 1,
        "status": result["status"],
        "reason": end.reason if end else "no end line",
    }


def mini_python() -> Path:
    """The bench's own virtualenv with mini-swe-agent 2.x, made once and reused."""
    python = VENV / "bin" / "python"
    if mini_version(python):
        return python
    print(f"making {VENV.relative_to(ROOT)} with {MINI} (once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    done = subprocess.run([python, "-m", "pip", "install", "-q", MINI], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(
            f"bench/agent_overhead.py: pip could not install {MINI} into {VENV}: "
            f"{done.stderr.strip().splitlines()[-1:]}; check pip's index settings"
        )
    return python


def mini_version(python: Path) -> str:
    """The installed mini-swe-agent's version ('' if none), read without importing it."""
    if not python.exists():
        return ""
    read = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('mini-swe-agent'))"],
        capture_output=True,
        text=True,
    )
    return read.stdout.strip() if read.returncode == 0 and read.stdout.startswith("2.") else ""


def mini_env(config_dir: Path) -> dict:
    """Quiet, offline mini-swe-agent: no banner, LiteLLM's bundled cost map (no fetch), its config
    folder in the bench's temporary folder."""
    return {
        **os.environ,
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(config_dir),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MSWEA_COST_TRACKING": "ignore_errors",
    }


def arex_launch(base_url: str, env_dir: Path, work: Path, token: str) -> tuple[list, dict]:
    return [sys.executable, __file__, "--arex-driver", str(env_dir), base_url, str(work)], dict(os.environ)


def mini_launch(base_url: str, env_dir: Path, work: Path, token: str) -> tuple[list, dict]:
    image = agent_image(SandboxConfig())
    driver = [
        str(mini_python()),
        str(ROOT / "bench" / "_mini_driver.py"),
        base_url,
        MODEL,
        image,
        f"arex.bench={token}",
        "/workspace",
        str(work / "mini.traj.json"),
    ]
    return driver, mini_env(work / "mini-config")


SIDES = {
    "arex": Side("arex", "bash", "submit", lambda pid, token: f"arex.owner_pid={pid}", arex_launch),
    "mini": Side(
        "mini",
        "mswea_bash_command",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
        lambda pid, token: f"arex.bench={token}",
        mini_launch,
    ),
}


def measure(side: Side, env_dir: Path, work: Path) -> Run:
    work.mkdir(parents=True)
    token = uuid.uuid4().hex[:12]
    probe = Probe(side, token)
    with ScriptedServer(Script(side, probe), model=MODEL, latency_s=LATENCY) as server:
        args, environ = side.launch(server.base_url, env_dir, work, token)
        proc = subprocess.Popen(args, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        probe.pid = proc.pid
        out, err = proc.communicate(timeout=900)
    if proc.returncode:
        raise SystemExit(
            f"bench/agent_overhead.py: the {side.name} side failed (exit {proc.returncode}): "
            f"{(err.strip().splitlines() or ['no output'])[-1]}"
        )
    info = json.loads(out.strip().splitlines()[-1])
    if not info.pop("ok"):
        raise SystemExit(f"bench/agent_overhead.py: the {side.name} side did not finish its steps: {info}")
    return probe.run(info)


def main() -> None:
    runs: dict[str, list[Run]] = {"arex": [], "mini": []}
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        root = Path(tmp)
        tiny_env(root)
        mini_python()
        for r in range(ROUNDS):
            for name, side in SIDES.items():
                runs[name].append(measure(side, root / "envs" / "sum-two", root / f"{name}-{r}"))
    best = {name: min(rs, key=lambda run: run.cpu_ms) for name, rs in runs.items()}
    report(best, runs)


def report(best: dict[str, Run], runs: dict[str, list[Run]]) -> None:
    version = mini_version(mini_python())
    print(
        f"{STEPS} steps measured per run (after {WARMUP} warm-up steps), teacher {LATENCY * 1000:.0f} ms per reply, "
        f"image {agent_image(SandboxConfig())}, best of {ROUNDS} runs per side"
    )
    print(
        f"{'side':22} {'CPU ms/step':>11} {'agent':>7} {'engine':>7} {'boxes':>7} {'wall ms/step*':>14} "
        f"{'containers':>10}  all runs (CPU ms/step)  ending"
    )
    for name, label in (("arex", "arex"), ("mini", f"mini-swe-agent {version}")):
        b = best[name]
        per = [f"{(x / STEPS * 1000):7.1f}" for x in (b.agent_s, b.engine_s, b.box_s)]
        every = " ".join(f"{run.cpu_ms:.1f}" for run in runs[name])
        print(f"{label:22} {b.cpu_ms:11.1f} {' '.join(per)} {b.wall_ms:14.1f} {b.containers:10}  {every:22}  {b.info}")
    print(
        "agent: the agent's process and its children; engine: dockerd, containerd, the side's shims; "
        "boxes: the side's containers' cgroups"
    )
    print("* wall per step beyond the teacher's latency")
    a, m = best["arex"], best["mini"]
    print(
        f"arex_ms_per_step={a.cpu_ms:.1f} mini_ms_per_step={m.cpu_ms:.1f} ratio={a.cpu_ms / m.cpu_ms:.2f} "
        f"arex_wall_ms_per_step={a.wall_ms:.1f} mini_wall_ms_per_step={m.wall_ms:.1f}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--arex-driver"]:
        print(json.dumps(asyncio.run(arex_driver(*sys.argv[2:5]))))
    else:
        main()
