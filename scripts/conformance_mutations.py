"""Remove one sandbox protection at a time and show that the check guarding it fails.

Run: python scripts/conformance_mutations.py [name-substring ...]
A conformance check that still passes with its protection removed is not checking anything; this
script is how we know each one bites. It prints one row per (mutation, check) and exits 1 if any
guarding check passed anyway, or if a mutation no longer applies or broke the sandbox outright
(then its checks failing would prove nothing: `exit_code_zero` must still pass under every one).

Every check runs on a harness of its own (a fresh sandbox and read-only folder): a check must bite
by itself, never because another check ran before it under the same mutation.

A mutation changes the container's options, the suite's config, the Python backend, or the
sources of the in-sandbox runtime (runner.c, box/*.py): `arex.sandbox.runtime._sources` is
patched, so the mutated runtime gets its own hash and is compiled into its own folder. Everything
is built under a temporary AREX_CACHE, so the real cache never holds a mutated runner.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arex.sandbox import cleaning, runtime
from arex.sandbox.conformance import CHECKS, Harness, readonly_source, run_check, suite_config
from arex.sandbox.docker import DockerSandbox
from arex.sandbox.execd import text as execd_text

CONTROL = "exit_code_zero"  # must pass under every mutation: the sandbox still works at all


@dataclass
class Mutation:
    checks: list[str]
    """The checks that must now fail."""
    options: Callable[[dict], Any] | None = None
    """A change to what `containers.create` gets."""
    config: dict = field(default_factory=dict)
    """Suite config fields changed (exec-time settings; "removing" one means a huge value)."""
    sources: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """runtime file (runner.c, box/server.py, ...) → (old, new) replacements, each must apply."""
    patches: list[tuple[Any, str, Any]] = field(default_factory=list)
    """(object, attribute, value) replaced in the Python backend."""


@contextlib.contextmanager
def patched(obj, attr, value):
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


def _options_with(change):
    original = DockerSandbox._container_options

    def options(self, volumes):
        opts = original(self, volumes)
        change(opts)
        return opts

    return options


def _sources_with(edits: dict[str, list[tuple[str, str]]]):
    original = runtime._sources

    def sources() -> dict[str, bytes]:
        files = original()
        for name, pairs in edits.items():
            text = files[name].decode()
            for old, new in pairs:
                if text.count(old) != 1:
                    raise LookupError(f"mutation does not apply to {name}: {old!r} found {text.count(old)} times")
                text = text.replace(old, new)
            files[name] = text.encode()
        return files

    return sources


@contextlib.contextmanager
def applied(m: Mutation):
    with contextlib.ExitStack() as stack:
        if m.options is not None:
            stack.enter_context(patched(DockerSandbox, "_container_options", _options_with(m.options)))
        if m.sources:
            stack.enter_context(patched(runtime, "_sources", _sources_with(m.sources)))
        for obj, attr, value in m.patches:
            stack.enter_context(patched(obj, attr, value))
        yield


# -- container options ------------------------------------------------------------------------
def _tmpfs_without(option: str):
    def change(opts):
        opts["tmpfs"] = {
            target: re.sub(rf"(^|,){option}=[^,]*", "", spec).lstrip(",") for target, spec in opts["tmpfs"].items()
        }

    return change


def _serving_as_agent(opts):
    opts["user"] = suite_config().user  # init, server and runner share the agent's uid


def _mounts_writable(opts):
    for volume in opts["volumes"].values():
        if volume["bind"] != runtime.TARGET:
            volume["mode"] = "rw"


# -- backend --------------------------------------------------------------------------------
_original_helper = DockerSandbox._helper
_original_archive = DockerSandbox.archive


def _helper_tar_follows_links(self, argv, *args, **kwargs):
    if len(argv) > 2 and argv[0] == "sh" and "exec tar -C" in argv[2]:
        argv = [*argv[:2], argv[2].replace("exec tar -C", "exec tar -h -C"), *argv[3:]]
    return _original_helper(self, argv, *args, **kwargs)


def _archive_without_cap(self, sandbox_dir, dest, max_bytes):
    return _original_archive(self, sandbox_dir, dest, 1 << 40)


def _unpack_with_gnu_tar(self, source, sandbox_dir, empty_first):
    """The unpacking before box/unpack.py: GNU tar, which stops at names over PATH_MAX."""
    script = 'mkdir -p -- "$1" && cd -- "$1" || exit 3\n'
    if empty_first:
        script += "chmod -R u+rwX . 2>/dev/null; find . -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +\n"
    script += "exec tar -x -p --no-same-owner -f -"
    reply = self._helper(
        ["sh", "-c", script, "arex-unpack", sandbox_dir], feed=lambda: iter(lambda: source.read(1 << 20), b"")
    )
    if reply["exit_code"] != 0:
        raise RuntimeError(f"unpacking failed: {execd_text(reply['err'])[0].strip()[-300:]}")


# -- runner.c edits -------------------------------------------------------------------------
RUNNER = "runner.c"
SERVER = "box/server.py"
NO_SETGROUPS_CHECK = ('if (setgroups(0, NULL) != 0) die("setgroups");', "setgroups(0, NULL);  /* mutated: may fail */")


# name → what is removed, and the checks that must then fail. The suite's config stays as it is
# unless a mutation says otherwise: the backend simply stops applying one protection.
def _replaced(text: str, old: str, new: str) -> str:
    """`text` with its one `old` replaced (a mutation that no longer applies must say so)."""
    if text.count(old) != 1:
        raise LookupError(f"{old.strip()!r} is not exactly once in the cleaning's script")
    return text.replace(old, new)


MUTATIONS: dict[str, Mutation] = {
    "no memory limit": Mutation(
        ["out_of_memory_is_distinct"], options=lambda o: (o.pop("mem_limit"), o.pop("memswap_limit"))
    ),
    "memory limit not tightened": Mutation(
        ["memory_limit_can_be_tightened"], patches=[(DockerSandbox, "set_memory_limit", lambda self, memory: None)]
    ),
    "no pids limit": Mutation(["pids_limit_caps_processes"], options=lambda o: o.pop("pids_limit")),
    # Networking is off in two ways (network_disabled and network_mode "none"): undo both.
    "host network": Mutation(
        ["only_loopback_network", "cannot_reach_host_services"],
        options=lambda o: o.update(network_mode="host", network_disabled=False),
    ),
    "capabilities not dropped": Mutation(["no_privileges"], options=lambda o: (o.pop("cap_drop"), o.pop("cap_add"))),
    "new privileges allowed": Mutation(["no_privileges"], options=lambda o: o.pop("security_opt")),
    "mount writable": Mutation(["readonly_mount_is_not_writable"], options=_mounts_writable),
    "root filesystem writable": Mutation(["disk_is_bounded"], options=lambda o: o.update(read_only=False)),
    "tmpfs without size": Mutation(["disk_is_bounded"], options=_tmpfs_without("size")),
    "tmpfs without inode limit": Mutation(["inodes_are_bounded"], options=_tmpfs_without("nr_inodes")),
    # The uid split: init, server and runner as the agent's uid (the runner tolerating that it
    # can no longer drop supplementary groups), so the agent can reach and kill them.
    "serving processes as agent uid": Mutation(
        ["serving_processes_are_out_of_reach", "server_survives_the_agent"],
        options=_serving_as_agent,
        sources={RUNNER: [NO_SETGROUPS_CHECK]},
    ),
    # Commands as root: the config refuses it, and the runner twice more; all three removed.
    "commands as root": Mutation(
        ["user_is_not_root", "no_privileges"],
        config={"user": "0:0"},
        sources={
            RUNNER: [
                ('    if (o->uid == 0) { fprintf(stderr, "arex-run: refusing to run as root\\n"); _exit(125); }\n', ""),
                (" || setuid(0) == 0) {", ") {"),
            ]
        },
    ),
    "no default timeout": Mutation(["timeout_status"], config={"timeout_s": 3600}),
    # The runner: subreaper, tree kill, sweep, evidence, limits, file reads as the user.
    "runner: no subreaper": Mutation(
        ["timeout_kills_tree_without_marker", "cpu_time_is_reported"],
        sources={RUNNER: [('    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die("subreaper");\n', "")]},
    ),
    "runner: kills only the main process": Mutation(
        ["timeout_kills_the_whole_tree", "timeout_kills_tree_without_marker"],
        sources={
            RUNNER: [
                (
                    "if (timed_out || killed || o.kill_tree) kill_all(getpid(), -1, &t);",
                    "if (timed_out || killed || o.kill_tree) kill(pid, SIGKILL);",
                )
            ]
        },
    ),
    "runner: no sweep of the user": Mutation(
        ["isolated_runs_leave_nothing", "batch_runs_are_isolated"],
        sources={
            RUNNER: [
                ("    if (o.sweep) kill_all(0, o.uid, &ignored);  /* nothing of an earlier run lives on */\n", ""),
                ("    if (o.sweep) kill_all(0, o.uid, &ignored);\n    int code", "    int code"),
            ]
        },
    ),
    "runner: nothing killed after": Mutation(  # the sweep before still runs: the leftovers are the run's own
        ["isolated_runs_leave_nothing", "batch_runs_are_isolated"],
        sources={
            RUNNER: [
                ("if (timed_out || killed || o.kill_tree) kill_all(", "if (timed_out || killed) kill_all("),
                ("    if (o.sweep) kill_all(0, o.uid, &ignored);\n    int code", "    int code"),
            ]
        },
    ),
    # Batch mode (run_each): a run holding the runner's own stdin (the next runs' inputs) and stdout (the results).
    "runner: batch runs hold the runner's streams": Mutation(
        ["batch_runs_are_isolated"], sources={RUNNER: [("    if (fds) place_fds(fds);\n", "")]}
    ),
    "runner: result fd left open": Mutation(
        ["evidence_cannot_be_forged"],
        sources={
            RUNNER: [
                (
                    "    if (o->result_fd >= 0) close(o->result_fd);"
                    "  /* the command must not write its own verdict */\n",
                    "",
                )
            ]
        },
    ),
    "runner: no CPU limit": Mutation(
        ["evidence_cannot_be_forged"],
        sources={RUNNER: [("    if (o->cpu > 0) set_limit(RLIMIT_CPU, o->cpu, o->cpu + 1);\n", "")]},
    ),
    "runner: CPU limit soft only": Mutation(
        ["evidence_cannot_be_forged"],
        sources={
            RUNNER: [
                ("set_limit(RLIMIT_CPU, o->cpu, o->cpu + 1)", "set_limit(RLIMIT_CPU, o->cpu, (long)RLIM_INFINITY)")
            ]
        },
    ),
    "runner: CPU of main process only": Mutation(
        ["cpu_time_is_reported"],
        sources={
            RUNNER: [
                (
                    "            account(&t, &ru);\n            if (w == pid) status = st, main_done = 1;",
                    "            if (w == pid) account(&t, &ru), status = st, main_done = 1;",
                )
            ]
        },
    ),
    "runner: no file size limit": Mutation(
        ["file_size_limit"],
        sources={RUNNER: [("    if (o->fsize > 0) set_limit(RLIMIT_FSIZE, o->fsize, o->fsize);\n", "")]},
    ),
    "runner: reads files as root": Mutation(
        ["read_file_does_not_follow_into_root_only_files"],
        sources={
            RUNNER: [
                (
                    "    become_agent(o);\n    if (o->read_path) _exit(read_file(o->read_path, o->read_cap));",
                    "    if (o->read_path) _exit(read_file(o->read_path, o->read_cap));\n    become_agent(o);",
                )
            ]
        },
    ),
    # The command server: output capture and the flood kill.
    "server: no output cap": Mutation(
        ["stdout_is_capped_with_marker", "stderr_is_capped_with_marker"],
        sources={
            SERVER: [
                (
                    "    def __init__(self, keep, req_id, stream):\n",
                    "    def __init__(self, keep, req_id, stream):\n        keep = 1 << 40\n",
                )
            ]
        },
    ),
    "server: flood not stopped": Mutation(
        ["output_flood_is_stopped"],
        sources={SERVER: [('if out.total + err.total > req["kill_at"] and state["killed"] is None:', "if False:")]},
    ),
    # Archives.
    "archive follows symlinks": Mutation(
        ["archive_restore_roundtrip"], patches=[(DockerSandbox, "_helper", _helper_tar_follows_links)]
    ),
    "archive ignores its cap": Mutation(
        ["archive_size_cap"], patches=[(DockerSandbox, "archive", _archive_without_cap)]
    ),
    "restore with GNU tar": Mutation(
        ["archive_restore_roundtrip"], patches=[(DockerSandbox, "_unpack", _unpack_with_gnu_tar)]
    ),
    # Reuse: the cleaning a grading pool runs between gradings, and its check.
    "cleaning: own roots not restored": Mutation(
        ["reuse_cleaning_restores_a_sealed_sandbox"],
        patches=[(cleaning, "INSPECT", _replaced(cleaning.INSPECT, "        os.chmod(path, mode)\n", ""))],
    ),
    "cleaning: attributes kept": Mutation(
        ["reuse_cleaning_restores_a_sealed_sandbox"],
        patches=[
            (
                cleaning,
                "INSPECT",
                _replaced(
                    cleaning.INSPECT,
                    "            os.removexattr(path, name, follow_symlinks=False)\n",
                    "            pass\n",
                ),
            )
        ],
    ),
    "cleaning: places not checked": Mutation(
        ["reuse_check_sees_a_sealed_sandbox"],
        patches=[(cleaning, "_place_problems", lambda *args: [])],
    ),
}


def _failure(check: str, config: dict) -> str | None:
    """Run one check alone, on a harness of its own with the suite's config changed by `config`
    (model_copy: the mutations may set what validation refuses, such as running as root)."""
    with readonly_source() as folder:
        harness = Harness(suite_config("docker", folder).model_copy(update=config))
        try:
            failure = run_check(harness, check)
        finally:
            harness.close()
    return None if failure is None else " ".join(failure.split())[:120]


def main(selected: list[str]) -> int:
    unknown = {c for m in MUTATIONS.values() for c in m.checks} - set(CHECKS)
    if unknown:
        print(f"unknown checks named by mutations: {sorted(unknown)}")
        return 2
    bad = run = 0
    print(f"{'mutation':36} {'check':46} result")
    for name, m in MUTATIONS.items():
        if selected and not any(s in name for s in selected):
            continue
        run += 1
        try:
            _sources_with(m.sources)()  # every edit must still apply to today's sources
        except LookupError as exc:
            bad += 1
            print(f"{name:36} {'-':46} MUTATION DOES NOT APPLY: {exc}", flush=True)
            continue
        with applied(m):
            control = _failure(CONTROL, m.config)
            if control is not None:
                bad += 1
                print(f"{name:36} {CONTROL:46} MUTATION BROKE THE SANDBOX: {control}", flush=True)
                continue
            for check in m.checks:
                failure = _failure(check, m.config)
                if failure is None:
                    bad += 1
                    verdict = "STILL PASSES (check does not bite)"
                else:
                    verdict = f"fails as it should: {failure}"
                print(f"{name:36} {check:46} {verdict}", flush=True)
    print(f"mutations={run} checks_not_biting={bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="arex-mutations-") as cache:
        os.environ["AREX_CACHE"] = cache  # mutated runtimes are built here, never in the real cache
        status = main(sys.argv[1:])
    sys.exit(status)
