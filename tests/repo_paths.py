"""Where things are in the checkout, for tests at any depth under tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""tests/: the helper modules (on the path of every test process: pyproject's `pythonpath`)."""
REPO = TESTS.parent
ENVS = REPO / "envs"
"""The bundled env sources (`arex build-envs envs/...`)."""
FIXTURES = TESTS / "fixtures"
CORPUS = TESTS / "corpus"
CONFIGS = REPO / "configs"
