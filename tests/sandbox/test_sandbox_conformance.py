"""Every sandbox backend must pass every check of arex.sandbox.conformance."""

import pytest

from arex.sandbox import BACKENDS
from arex.sandbox.conformance import CHECKS, run_suite

pytestmark = pytest.mark.docker

# The properties the sandbox's security rests on (docs/security.md): each has its check, and
# scripts/conformance_mutations.py shows each check failing when its protection is removed.
REQUIRED = {
    "serving_processes_are_out_of_reach",
    "server_survives_the_agent",
    "evidence_cannot_be_forged",
    "timeout_kills_the_whole_tree",
    "timeout_kills_tree_without_marker",
    "isolated_runs_leave_nothing",
    "batch_runs_are_isolated",
    "disk_is_bounded",
    "inodes_are_bounded",
    "cpu_time_is_reported",
    "read_file_does_not_follow_into_root_only_files",
    "archive_restore_roundtrip",
    "archive_size_cap",
    "no_privileges",
    "user_is_not_root",
}


def test_suite_is_big_enough():
    assert len(CHECKS) >= 45
    assert REQUIRED <= set(CHECKS), sorted(REQUIRED - set(CHECKS))
    # arex's own backends (tests register a non-isolating "process" backend of their own in this process)
    shipped = {name for name, where in BACKENDS.items() if where.startswith("arex.")}
    assert shipped == {"docker", "unshare"}, "a new backend must be added to the conformance parametrisation"


@pytest.mark.parametrize("check", list(reversed(CHECKS)))
def test_docker_backend(check):
    """Each check once, on a harness of its own (a fresh sandbox and read-only folder), last check
    first: it passes, and by itself, never because an earlier check left something behind."""
    outcome = run_suite("docker", only=[check], alone=True)
    assert outcome == {check: None}, outcome[check]
