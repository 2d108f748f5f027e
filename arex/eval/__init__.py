"""`arex eval`: a model run on a benchmark's problems under the benchmark's own protocol, scored as
the benchmark scores it.

A benchmark is chosen by its short name in the one table below, `BENCHMARKS`: name → "module:Class"
of its adapter (imported only when chosen, so `arex eval --help` loads none of them). An adapter is
a subclass of `arex.eval.base.Benchmark` (read its docstring): it turns the benchmark's folder into
arex envs, and scores one rollout's rounds as the benchmark does. Registering one is one line here:

    "my-bench": "arex.eval.mybench:MyBench",

Everything else (running the model through arex.rollout's batch and variants, resuming, the
per-problem table, the spread over samples, the per-round curve, tokens and cost, eval.json and
eval.md) is `arex.eval.run`'s, the same for every benchmark.
"""

from __future__ import annotations

import importlib

from arex.errors import UserInputError

BENCHMARKS: dict[str, str] = {
    "frontier-cs": "arex.eval.frontier:FrontierCS",
    "mle-bench": "arex.eval.mlebench:MLEBench",
}


def make_benchmark(name: str):
    """The adapter registered as `name`, made; UserInputError naming the known ones for any other."""
    if name not in BENCHMARKS:
        raise UserInputError(f"benchmark {name!r} is not known; choose one of: {', '.join(sorted(BENCHMARKS))}")
    module, _, cls = BENCHMARKS[name].partition(":")
    try:
        found = getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as exc:
        if exc.name != module:  # a bug inside the adapter: its traceback
            raise
        raise UserInputError(f"benchmark {name!r}: its adapter {BENCHMARKS[name]} is not installed") from None
    return found()
