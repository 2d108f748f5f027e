PYTHON ?= python3
export PYTHON
# The tests start hundreds of `python -m arex` children: let them reuse compiled bytecode even where the
# shell says not to write it (a fresh compile of arex costs each child about a CPU-second).
unexport PYTHONDONTWRITEBYTECODE
# make test: two workers; the tests sharing a module-scoped fixture stay on one, the longest modules start
# first (tests/conftest.py; `pytest --write-durations` records the seconds in tests/durations.json)
PARALLEL ?= -n 2 --dist loadgroup

.PHONY: setup test test-fast lint demo bench
setup:  ## install and start everything arex needs (idempotent)
	bash scripts/setup.sh

test: setup lint  ## set up, lint, then run every test (Docker and local-model tests included), then show each sandbox check bites
	$(PYTHON) -m pytest $(PARALLEL) -m "not serial" --durations=25
	$(PYTHON) -m pytest -m serial
	$(PYTHON) scripts/conformance_mutations.py

test-fast:  ## no Docker, model, cluster or trainer stack: the loop, selection and export on checked-in fixtures
	$(PYTHON) -m pytest -m "not docker and not local_model and not suite and not browser and not ray and not heavy" -q -n 2

lint:  ## ruff: pyflakes, import order, line length, complexity (settings in pyproject.toml)
	$(PYTHON) -m ruff check arex tests bench scripts

demo:  ## set up, then the main job: build-envs -> rollout (local teacher) -> select -> export -> report (prints its path last)
	bash scripts/demo.sh

bench:  ## every bench/*.py in its own process (B_ONLY=judge_overhead,agent_overhead for some): one table, arex vs baseline, in bench/results/results.{md,json}
	$(PYTHON) bench/run_all.py
