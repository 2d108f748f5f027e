"""Context growth: the same 30-round scripted rollout in bounded and in full-history mode.

Run: python bench/context_growth.py
Prints prompt tokens per round (all calls of the round, counted by the scripted server's
tokenizer and recorded per call) for both modes.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from _common import SOLUTION, tiny_env

from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

ROUNDS = 30


def commands(n: int) -> list[str]:
    # A realistic round: look around, edit, test; the solution is fixed in round 10.
    fix = f"cat > solution.py <<'EOF'\n{SOLUTION}EOF" if n == 10 else "cat solution.py"
    return ["ls -la", fix, "echo '1 2' | python3 solution.py"]


def per_round_tokens(mode: str, root: Path, env) -> list[int]:
    with ScriptedServer(RoundScript(commands), model="scripted-teacher") as server:
        teacher = TeacherConfig(model="scripted-teacher", track_cost=False)
        config = RolloutConfig(rounds=ROUNDS, context=mode)
        asyncio.run(run_batch([env], teacher, config, SandboxConfig(), root / mode, 1, 1, server.base_url))
    [path] = (root / mode / env.id).glob("*.jsonl")
    tokens = []
    for round_ in load(path).rounds:
        calls = [s.call for s in round_.steps] + [round_.end.reflection.call]
        tokens.append(sum(c.prompt_tokens for c in calls))
    return tokens


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        root = Path(tmp)
        env = tiny_env(root)
        bounded = per_round_tokens("bounded", root, env)
        full = per_round_tokens("full-history", root, env)
    print(f"{'round':>5} {'bounded':>10} {'full-history':>13}")
    for i, (b, f) in enumerate(zip(bounded, full), start=1):
        print(f"{i:>5} {b:>10} {f:>13}")
    print(f"{'total':>5} {sum(bounded):>10} {sum(full):>13}")
    r30_r2 = bounded[ROUNDS - 1] / bounded[1]
    ratio = sum(full) / sum(bounded)
    print(
        f"bounded round 30 / round 2 = {r30_r2:.3f} (target <= 1.3); full / bounded total = {ratio:.2f} (target >= 5)"
    )
    print(
        f"bounded_r30_over_r2={r30_r2:.3f} full_over_bounded_total={ratio:.2f} bounded_tokens={sum(bounded)} "
        f"full_tokens={sum(full)}"
    )


if __name__ == "__main__":
    main()
