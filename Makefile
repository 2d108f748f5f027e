PYTHON ?= python3
export PYTHON

.PHONY: setup test demo
setup:  ## install and start everything arex needs (idempotent)
	bash scripts/setup.sh

test: setup  ## set up, then run every test (Docker and local-model tests included), then show each sandbox check bites
	$(PYTHON) -m pytest
	$(PYTHON) scripts/conformance_mutations.py

demo:  ## set up, then the main job: build-envs -> rollout (local teacher) -> select -> export
	bash scripts/demo.sh
