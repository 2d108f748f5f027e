import pytest

from arex.sandbox.conformance import Harness, readonly_source, suite_config


@pytest.fixture(scope="module")
def harness():
    """A conformance harness on the Docker backend (one shared sandbox per test module)."""
    with readonly_source() as folder:
        h = Harness(suite_config("docker", folder))
        try:
            yield h
        finally:
            h.close()
