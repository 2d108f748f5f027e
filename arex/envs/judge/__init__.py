"""The judge kind: a problem with tests, the agent's submission a program graded by a judge.

Its row is `judge` in arex.specs.KINDS (the default kind). Its parts: `env.py` (JudgeEnv, the built
env as the rollout sees it) and `facts.py` (the task as told to a skill-drafting teacher). Its
builder (arex/envs/judge_build.py) and source loaders (arex/envs/sources/) keep their module paths,
which callers and tests import and patch."""
