"""The ML kind: a git repository whose run command writes predictions, scored on held-out labels.

Its row is `ml` in arex.specs.KINDS. Its parts: `env.py` (MLEnv, the built env as the rollout
sees it) and `facts.py` (the task as told to a skill-drafting teacher). Its source detector and
builder (arex/envs/ml_source.py, ml_build.py and the ml_* modules they use) keep their module
paths, which callers and tests import and patch."""
