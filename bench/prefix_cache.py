"""Prefix caching: the share of prompt tokens a server's prompt cache can serve, for arex's requests
(bounded and full-history context, text and tools, 10 and 30 rounds) next to mini-swe-agent's
append-only history on the same steps.

Run: python bench/prefix_cache.py   (B_ROUNDS=10 for a quicker look; B_MINI=0 leaves mini out)
Real rollouts with the scripted teacher on the tiny judge env (bench/_common.py): each round three
commands (look, edit or read, test), `submit`, a reflection; 5 calls a round. The requests are
rebuilt from the records (each checked byte for byte against what the server received), rendered
with the bundled model's chat template (SmolLM2, ChatML; in the `tools` format the tool definitions
follow the system prompt and calls are rendered as JSON, as Hermes-style templates do) and tokenized
with its vocabulary. mini-swe-agent (bench/.venv-mini, as bench/agent_overhead.py makes it) runs the
same commands, five a round, against the same scripted server in the same image.
Rules, each against every earlier request of the same run (an unbounded cache):
  ideal   the longest shared token prefix (a radix cache: SGLang)
  vllm    that prefix in whole 16-token blocks (vLLM's automatic prefix caching)
  openai  nothing under 1,024 shared tokens, then 1,024 + whole 128-token steps (OpenAI's rule)
Every rule leaves the last prompt token uncached. Last line: the 30-round (B_ROUNDS) bounded text
shares, the full-history one and mini's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from _common import ROOT, SOLUTION, tiny_env

from arex.dataset.masks import load_tokenizer
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.cache import marked
from arex.teacher.client import TeacherConfig
from arex.teacher.local import find_gguf
from arex.teacher.scripted import Reply, RoundScript, ScriptedServer

ROUNDS = int(os.environ.get("B_ROUNDS", 30))
MODEL = "scripted-teacher"


def commands(n: int) -> list[str]:
    fix = f"cat > solution.py <<'EOF'\n{SOLUTION}EOF" if n == 10 else "cat solution.py"
    return ["ls -la", fix, "echo '1 2' | python3 solution.py"]


def rebuilt(path: Path) -> list[dict]:
    """Every request of a record, rebuilt from it: messages (marked if they were) and tools."""
    t = load(path)
    out = []
    for r in t.rounds:
        for i in [*range(len(r.steps)), None]:
            messages = r.messages(i)
            sent = marked(messages) if t.header.cache_breakpoints else messages
            out.append({"messages": sent, "tools": t.header.tools})
    return out


def arex_requests(root: Path, env, context: str, fmt: str, rounds: int) -> list[dict]:
    store = root / f"{context}-{fmt}-{rounds}"
    with ScriptedServer(RoundScript(commands), model=MODEL) as server:
        config = RolloutConfig(rounds=rounds, context=context, action_format=fmt)
        teacher = TeacherConfig(model=MODEL, track_cost=False)
        asyncio.run(run_batch([env], teacher, config, SandboxConfig(), store, 1, 1, server.base_url))
        sent = list(server.requests)
    [path] = (store / env.id).glob("*.jsonl")
    mine = rebuilt(path)
    for a, b in zip(mine, sent, strict=True):
        if json.dumps(a["messages"]) != json.dumps(b["messages"]) or a["tools"] != b.get("tools"):
            raise SystemExit(f"bench/prefix_cache.py: a request rebuilt from {path} is not the one sent")
    return mine


def mini_requests(root: Path, rounds: int) -> list[dict]:
    """mini-swe-agent's requests for the same commands, five calls a round (its submit last)."""
    from agent_overhead import mini_env, mini_python

    from arex.envs.docs_index import agent_image

    steps = [c for n in range(1, rounds + 1) for c in [*commands(n), "echo '1 2' | python3 solution.py", "ls"]]

    def script(request: dict, index: int) -> Reply:
        action = steps[index] if index < len(steps) else "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        return Reply(f"THOUGHT: step {index}.\n\n```mswea_bash_command\n{action}\n```")

    with ScriptedServer(script, model=MODEL) as server:
        driver = [str(mini_python()), str(ROOT / "bench" / "_mini_driver.py"), server.base_url, MODEL]
        argv = driver + [agent_image(SandboxConfig()), "arex.bench=prefix-cache", "/workspace", str(root / "mini.json")]
        done = subprocess.run(argv, env=mini_env(root / "mini-config"), capture_output=True, text=True, timeout=1800)
        if done.returncode:
            raise SystemExit(f"bench/prefix_cache.py: mini-swe-agent failed: {done.stderr.strip()[-300:]}")
        return [{"messages": r["messages"], "tools": r.get("tools")} for r in server.requests][: len(steps)]


class Tokens:
    def __init__(self):
        self.tokenizer = load_tokenizer(find_gguf())

    def render(self, request: dict) -> str:
        parts = []
        for i, m in enumerate(request["messages"]):
            content = m.get("content") or ""
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content)
            if i == 0 and m["role"] == "system" and request.get("tools"):
                content += "\n\n# Tools\n" + "\n".join(json.dumps(t) for t in request["tools"])
            for call in m.get("tool_calls") or []:
                content += "\n<tool_call>" + json.dumps(call["function"]) + "</tool_call>"
            parts.append(f"<|im_start|>{m['role']}\n{content}<|im_end|>\n")
        return "".join(parts) + "<|im_start|>assistant\n"

    def shares(self, requests: list[dict]) -> dict[str, float]:
        seqs = [np.array(self.tokenizer(self.render(r), add_special_tokens=False)["input_ids"]) for r in requests]
        total = ideal = vllm = openai = 0
        for k, s in enumerate(seqs):
            shared = max((_common_prefix(p, s) for p in seqs[:k]), default=0)
            shared = min(shared, len(s) - 1)
            total, ideal, vllm = total + len(s), ideal + shared, vllm + shared // 16 * 16
            openai += 0 if shared < 1024 else 1024 + (shared - 1024) // 128 * 128
        return {"calls": len(seqs), "tokens": total, "ideal": ideal / total, "vllm": vllm / total,
                "openai": openai / total}  # fmt: skip


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def main() -> None:
    tokens, rows = Tokens(), {}
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        root = Path(tmp)
        env = tiny_env(root)
        for rounds in sorted({10, ROUNDS}):
            for context in ("bounded", "full-history"):
                for fmt in ("text", "tools"):
                    rows[(context, fmt, rounds)] = tokens.shares(arex_requests(root, env, context, fmt, rounds))
            if os.environ.get("B_MINI", "1") != "0":
                rows[("mini-swe-agent", "text", rounds)] = tokens.shares(mini_requests(root, rounds))
    print(f"{'requests':24} {'rounds':>6} {'calls':>6} {'prompt tokens':>14} {'ideal':>7} {'vllm':>7} {'openai':>7}")
    for (context, fmt, rounds), s in rows.items():
        print(f"{context + ' ' + fmt:24} {rounds:>6} {s['calls']:>6} {s['tokens']:>14} "
              f"{s['ideal']:>7.3f} {s['vllm']:>7.3f} {s['openai']:>7.3f}")  # fmt: skip
    print("every arex request rebuilt from its record is the one the server received")
    b, f = rows[("bounded", "text", ROUNDS)], rows[("full-history", "text", ROUNDS)]
    mini = rows.get(("mini-swe-agent", "text", ROUNDS), {"ideal": float("nan")})
    bt = rows[("bounded", "tools", ROUNDS)]
    print(f"bounded_ideal={b['ideal']:.3f} bounded_vllm={b['vllm']:.3f} bounded_openai={b['openai']:.3f} "
          f"bounded_tools_ideal={bt['ideal']:.3f} bounded_tools_openai={bt['openai']:.3f} "
          f"full_ideal={f['ideal']:.3f} mini_ideal={mini['ideal']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
