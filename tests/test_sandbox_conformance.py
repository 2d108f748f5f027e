"""Every sandbox backend must pass every check of arex.sandbox.conformance."""

import pytest

from arex.sandbox import BACKENDS
from arex.sandbox.conformance import CHECKS

pytestmark = pytest.mark.docker


def test_suite_is_big_enough():
    assert len(CHECKS) >= 25
    assert set(BACKENDS) == {"docker"}, "a new backend must be added to the conformance parametrisation"


@pytest.mark.parametrize("check", list(CHECKS))
def test_docker_backend(harness, check):
    CHECKS[check](harness)
