PYTHON ?= python3
export PYTHON

.PHONY: setup test demo
setup:  ## install and start everything arex needs (idempotent)
	bash scripts/setup.sh

test: setup  ## set up, then run every test (Docker and local-model tests included)
	$(PYTHON) -m pytest

demo:  ## set up, then the main job: build-envs -> rollout (local teacher) -> select -> export
	bash scripts/demo.sh
