PYTHON ?= python3
export PYTHON

.PHONY: setup test
setup:  ## install and start everything arex needs (idempotent)
	bash scripts/setup.sh

test: setup  ## set up, then run every test (Docker and local-model tests included)
	$(PYTHON) -m pytest
