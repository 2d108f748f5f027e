"""The `guess` kind: a number to guess, scored by how close the agent's guess.txt comes to it.

A whole env kind in one folder, as a new kind in arex/envs/<kind>/ would be: `spec.py` (its
task.yaml), `env.py` (the built env as the rollout and selection see it), `build.py` (its source
detector, env id and builder). Nothing in arex names it: tests/envs/test_new_kind.py adds its row."""

ROW = {
    "env": "kinds.guess.env:GuessEnv",
    "spec": "kinds.guess.spec:GuessSpec",
    "source": "kinds.guess.build:is_source",
    "build": "kinds.guess.build:build",
    "env_id": "kinds.guess.build:env_id",
    "facts": "kinds.guess.build:facts",
}
"""Its parts by "module:name", as the row for it in arex.specs.KINDS names them."""
