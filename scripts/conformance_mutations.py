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
from arex.sandbox.conformance import CHECKS, Harness, readonly_source, suite_config


@contextlib.contextmanager
def patched(obj, attr, value):
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


# name → (config changes, code patch or None, checks that must now fail)
MUTATIONS = {
    "no memory limit": ({"memory": 64 << 30}, None, ["out_of_memory_is_distinct"]),
    "no pids limit": ({"pids_limit": -1}, None, ["pids_limit_caps_processes"]),
    "host network": ({}, (docker_backend, "NETWORK_NONE", "host"), ["only_loopback_network", "cannot_reach_host_services"]),
    "root user": ({"user": "0:0"}, None, ["user_is_not_root"]),
    "mount writable": ("rw-mount", None, ["readonly_mount_is_not_writable"]),
    "no output cap": ({"output_limit": 10**9}, None, ["stdout_is_capped_with_marker", "stderr_is_capped_with_marker"]),
    "no output kill": ({"output_kill": 10**12}, None, ["output_flood_is_stopped"]),
    "no file size limit": ({"max_file_size": 1 << 40}, None, ["file_size_limit"]),
    "no default timeout": ({"timeout_s": 60}, None, ["timeout_status"]),
    "kill only the top process": ({}, (docker_backend, "_KILL_TREE", 'kill -9 $(pgrep -f "sleep 60") 2>/dev/null; exit 0'), ["timeout_kills_the_whole_tree"]),
}


def main() -> int:
    bad = 0
    print(f"{'mutation':28} {'check':36} result")
    for name, (changes, patch, checks) in MUTATIONS.items():
        with readonly_source() as folder, (patched(*patch) if patch else contextlib.nullcontext()):
            config = suite_config("docker", folder)
            if changes == "rw-mount":
                changes = {"mounts": tuple(m.model_copy(update={"read_only": False}) for m in config.mounts)}
            harness = Harness(config.model_copy(update=changes))  # model_copy: skip validation on purpose
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
