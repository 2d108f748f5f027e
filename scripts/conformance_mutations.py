"""Remove one sandbox limit at a time and show that the check guarding it fails.

Run: python scripts/conformance_mutations.py
A conformance check that still passes with its limit removed is not checking anything; this
script is how we know each one bites. It prints one row per mutation and exits 1 if any
guarding check passed anyway.
"""

from __future__ import annotations

import contextlib
import sys

from arex.sandbox import docker as docker_backend
from arex.sandbox import execd
from arex.sandbox.docker import DockerSandbox
from arex.sandbox.conformance import CHECKS, Harness, readonly_source, suite_config


@contextlib.contextmanager
def patched(obj, attr, value):
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


def without(change):
    """Patch the Docker backend so it builds containers with one isolation option changed."""
    original = DockerSandbox._container_options

    def options(self, volumes):
        opts = original(self, volumes)
        change(opts)
        return opts

    return patched(DockerSandbox, "_container_options", options)


@contextlib.contextmanager
def dumpable():
    """The init and the command server it forks, both left dumpable (their pipes in reach)."""
    prctl = "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)"
    with patched(execd, "INIT", execd.INIT.replace(prctl, "pass")), patched(execd, "SERVER", execd.SERVER.replace(prctl, "pass")):
        yield


class _Uncapped(docker_backend._Capped):
    def __init__(self, limit):
        super().__init__(10**12)


# name → (patch, checks that must now fail). The suite's config stays as it is: the backend
# simply stops applying one limit, which is the bug each check exists to catch.
MUTATIONS = {
    "no memory limit": (without(lambda o: (o.pop("mem_limit"), o.pop("memswap_limit"))), ["out_of_memory_is_distinct"]),
    "no pids limit": (without(lambda o: o.pop("pids_limit")), ["pids_limit_caps_processes"]),
    # Networking is off in two ways (network_disabled and network_mode "none"): undo both.
    "host network": (without(lambda o: o.update(network_mode="host", network_disabled=False)), ["only_loopback_network", "cannot_reach_host_services"]),
    "root user": ("user", ["user_is_not_root"]),
    "capabilities kept": (without(lambda o: (o.pop("cap_drop"), o.pop("security_opt"))), ["no_privileges"]),
    "mount writable": (without(lambda o: [v.update(mode="rw") for v in o["volumes"].values()]), ["readonly_mount_is_not_writable"]),
    "no file size limit": (without(lambda o: o.pop("ulimits")), ["file_size_limit"]),
    "no output cap": (patched(docker_backend, "_Capped", _Uncapped), ["stdout_is_capped_with_marker", "stderr_is_capped_with_marker"]),
    "no output kill": ("output_kill", ["output_flood_is_stopped"]),
    "no default timeout": ("timeout_s", ["timeout_status"]),
    "kill only the top process": (patched(docker_backend, "_KILL_TREE", 'pkill -9 -f "^sleep 60"; exit 0'), ["timeout_kills_the_whole_tree"]),
    # The same two rules as enforced by the in-sandbox command server:
    "server: no tree kill": (
        patched(execd, "SERVER", execd.SERVER.replace('    needle = ("AREX_EXEC_ID=" + marker).encode()', "    return")),
        ["timeout_kills_the_whole_tree"],
    ),
    "server: no output cap": (
        patched(execd, "SERVER", execd.SERVER.replace('limit, kill_at = req["keep"], req["kill_at"]', 'limit, kill_at = 10**12, req["kill_at"]')),
        ["stdout_is_capped_with_marker", "stderr_is_capped_with_marker"],
    ),
    "server: dumpable": (dumpable(), ["serving_processes_are_out_of_reach"]),
}
# Mutations of the docker-exec path run with the command server off; "server:" ones with it on.
# Exec-time settings are read from the config on every call: "removing" one means a huge value
# (or root, which the config's own validation would refuse).
_CONFIG_MUTATIONS = {"output_kill": 10**12, "timeout_s": 3600, "user": "0:0"}


def main() -> int:
    bad = 0
    print(f"{'mutation':28} {'check':36} result")
    for name, (patch, checks) in MUTATIONS.items():
        changes = {patch: _CONFIG_MUTATIONS[patch]} if isinstance(patch, str) else {}
        with readonly_source() as folder, (contextlib.nullcontext() if changes else patch):
            path = {"exec_server": name.startswith("server:")}
            harness = Harness(suite_config("docker", folder).model_copy(update={**changes, **path}))
            try:
                for check in checks:
                    try:
                        CHECKS[check](harness)
                        verdict, bad = "STILL PASSES (check does not bite)", bad + 1
                    except Exception as exc:  # noqa: BLE001
                        verdict = f"fails as it should: {type(exc).__name__}: {str(exc)[:70]}"
                    print(f"{name:28} {check:36} {verdict}", flush=True)
            finally:
                harness.close()
    print(f"mutations={len(MUTATIONS)} checks_not_biting={bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
