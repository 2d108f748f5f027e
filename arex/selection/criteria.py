"""Selection criteria: small functions `(trajectory, env, config) -> Drop | None`, in a table.

`PRECONDITIONS` decide whether a trajectory can be judged at all (a drop there ends its checks);
`CRITERIA` run in order, cheap ones first, and every one runs, so a verdict lists each reason that
applies. Re-grading and the LLM judge are not here: they need sandboxes and a teacher, and run in
`arex.selection.selector` only on what these keep.
"""

from __future__ import annotations

import functools
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from arex.envs.runtime import Env
from arex.record.snapshots import MemberError, SnapshotStore, read_member
from arex.record.trajectory import RoundEnd, Trajectory
from arex.selection.config import SelectConfig
from arex.selection.exploits import KINDS, find_attempts, reason_of
from arex.selection.leaks import HiddenContent, find_in


@dataclass(frozen=True)
class Drop:
    reason: str
    """Short name, counted in the drop table (e.g. 'no_improvement')."""
    detail: str
    """What was found, for a person."""


Criterion = Callable[[Trajectory, "Env | None", SelectConfig], "Drop | None"]

# What reading a snapshot can raise: the archive or its member is bad.
SNAPSHOT_ERRORS = (ValueError, OSError, tarfile.TarError)


@dataclass
class Target:
    """A round select re-checks from its snapshot, with the names it goes by (first, best, last)."""

    end: RoundEnd
    archive: Path | None
    missing: str = ""
    """Why there is no archive."""
    labels: list[str] = field(default_factory=list)


def targets_of(trajectory: Trajectory) -> list[Target]:
    """The final, best and first rounds (one entry per round), each with its snapshot archive.

    The best is the round with the highest recorded held-out score: that is the score the
    criteria read, so that is the one whose re-grade must hold."""
    ends = [r.end for r in trajectory.rounds]
    if not ends:
        return []
    best = max(ends, key=lambda e: e.grade.held_out_score)
    store = SnapshotStore(trajectory.path.with_suffix("") / "snapshots")
    by_round: dict[int, Target] = {}
    for label, end in (("last", ends[-1]), ("best", best), ("first", ends[0])):
        if end.round not in by_round:
            by_round[end.round] = _target(end, store)
        by_round[end.round].labels.append(label)
    return list(by_round.values())


def _target(end: RoundEnd, store: SnapshotStore) -> Target:
    if end.snapshot is None:
        return Target(end, None, f"round {end.round} has no workspace snapshot (the workspace could not be archived)")
    try:
        archive = store.path(end.snapshot)
    except ValueError as exc:
        return Target(end, None, f"round {end.round}: {exc}")
    if not archive.is_file():
        return Target(end, None, f"round {end.round}'s workspace snapshot {archive} is missing")
    return Target(end, archive)


def scores_of(t: Trajectory, env: Env) -> dict[str, float | None]:
    held = t.held_out
    return {
        "first": held[0],
        "best": max(held),
        "final": held[-1],
        "baseline": env.baseline_score,
        "improvement": max(held) - held[0],
        "rounds": len(held),
    }


def _streak(items: list) -> int:
    best = run = 0
    previous = object()
    for item in items:
        run = run + 1 if item == previous else 1
        best, previous = max(best, run), item
    return best


# -- preconditions ---------------------------------------------------------------------------------
def no_rounds(t: Trajectory, env: Env | None, c: SelectConfig) -> Drop | None:
    if t.header is None or not t.rounds:
        return Drop("no_rounds", "the record has no complete round")
    return None


def env_missing(t: Trajectory, env: Env | None, c: SelectConfig) -> Drop | None:
    if env is None:
        return Drop("env_missing", f"env '{t.header.env_id}' is not in the env store, so nothing can be re-checked")
    return None


def env_changed(t: Trajectory, env: Env | None, c: SelectConfig) -> Drop | None:
    if env.spec_hash != t.header.spec_hash:
        return Drop("env_changed", f"env spec hash {env.spec_hash} differs from the recorded {t.header.spec_hash}")
    return None


# -- criteria --------------------------------------------------------------------------------------
def ending(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    end = t.end
    if end is None or end.status == "interrupted":
        return Drop("unfinished", "the rollout has no ending yet; re-run `arex rollout` to finish it")
    if end.status == "infra_failed":
        return Drop("infra_failure", end.reason)
    if end.status in ("teacher_error", "context_overflow"):
        return Drop("teacher_error", f"{end.status}: {end.reason}")
    if end.status == "budget" and c.drop_budget_overrun:
        return Drop("budget_overrun", end.reason)
    return None


def below_baseline(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    final, baseline = t.held_out[-1], env.baseline_score
    if baseline is not None and c.min_final_over_baseline is not None and final - baseline < c.min_final_over_baseline:
        return Drop("below_baseline", f"final held-out {final:.6g} vs baseline {baseline:.6g}")
    return None


def best_below_baseline(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    best, baseline = max(t.held_out), env.baseline_score
    if baseline is not None and c.min_best_over_baseline is not None and best - baseline < c.min_best_over_baseline:
        return Drop("best_below_baseline", f"best held-out {best:.6g} vs baseline {baseline:.6g}")
    return None


def no_improvement(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    held = t.held_out
    if c.min_improvement is not None and max(held) - held[0] < c.min_improvement:
        return Drop("no_improvement", f"best held-out {max(held):.6g} vs first round {held[0]:.6g}")
    return None


def protocol(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    ends = [r.end for r in t.rounds]
    unsubmitted = [e.round for e in ends if e.ending != "submitted"]
    if c.max_rounds_without_submit is not None and len(unsubmitted) > c.max_rounds_without_submit:
        how = ", ".join(sorted({e.ending for e in ends if e.ending != "submitted"}))
        return Drop("protocol", f"rounds {unsubmitted[:10]} ended without `submit` ({how})")
    return None


def reflected(end: RoundEnd, mode: str) -> bool:
    """A usable reflection reply: any (mode 'present') or with all four headings ('complete')."""
    call = end.reflection.call
    if call.status != "ok" or not (call.content or "").strip():
        return False
    return mode == "present" or end.reflection.complete


def missing_reflection(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    if c.reflection == "off":
        return None
    missing = [r.end.round for r in t.rounds if not reflected(r.end, c.reflection)]
    if missing:
        return Drop("missing_reflection", f"rounds {missing[:10]} lack a {c.reflection} reflection")
    return None


def repeated_actions(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    actions = [step.action.command or step.action.kind for r in t.rounds for step in r.steps]
    if c.max_repeat_streak is not None and _streak(actions) > c.max_repeat_streak:
        return Drop("repeated_actions", f"{_streak(actions)} identical actions in a row")
    return None


def unchanged_resubmits(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    unchanged = _streak([r.end.submission for r in t.rounds]) - 1
    if c.max_unchanged_resubmits is not None and unchanged > c.max_unchanged_resubmits:
        return Drop("unchanged_resubmits", f"{unchanged} resubmissions in a row without a change")
    return None


def protected_files(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    """Protected files must be byte-identical in the final and the best workspace (read from their
    archives, never unpacked). A missing or unreadable archive is judged by `snapshots_present`."""
    if not c.check_protected or not env.protected:
        return None
    changed: list[str] = []
    for target in targets_of(t):
        labels = [label for label in target.labels if label in ("last", "best")]
        if labels and target.archive is not None:
            try:
                changed += [f"{rel} ({'/'.join(labels)})" for rel in protected_changes(target.archive, env)]
            except SNAPSHOT_ERRORS:
                pass  # reported as bad_snapshot by the scan that runs before any criterion
    if changed:
        return Drop("protected_file_changed", f"changed: {', '.join(sorted(changed))}")
    return None


def snapshots_present(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    """The archives the protected-file check and re-grading read must exist."""
    needed = [
        target
        for target in targets_of(t)
        if (c.check_protected and env.protected and {"last", "best"} & set(target.labels)) or c.regrade
    ]
    missing = [target.missing for target in needed if target.archive is None]
    if missing:
        return Drop("no_snapshot", f"{missing[0]}, so it cannot be checked")
    return None


def hidden_content(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    """Hidden-test content (or the canary, or label rows) in what the agent saw or wrote, plain or
    transformed (arex.selection.leaks): grading let private data through, and the record teaches
    whatever it used it for. Always on: a trust check, not a taste."""
    found = find_in(t, _hidden_of(str(env.dir), env.spec_hash))
    return Drop("hidden_content", found) if found else None


def exploit_attempts(t: Trajectory, env: Env, c: SelectConfig) -> Drop | None:
    """An agent that tried to cheat (arex.selection.exploits): the sandbox blocked it, but the record
    would teach the attempt. The reason names the first kind found; the detail every kind, with its
    round, step and evidence."""
    if not c.exploit_attempts:
        return None
    found = find_attempts(t, env)
    if not found:
        return None
    return Drop(reason_of(found[0].kind), "; ".join(f.detail() for f in found))


@functools.lru_cache(maxsize=64)
def _hidden_of(env_dir: str, spec_hash: str) -> HiddenContent:
    """An env's private data, read once per selection process (the spec hash keys a rebuild)."""
    return HiddenContent(Path(env_dir))


def protected_changes(archive: Path, env: Env) -> list[str]:
    """The protected files (relative to the workspace) that differ from the env's originals in `archive`."""
    changed = []
    for rel in env.protected:
        original = env.dir / "workspace" / rel
        if not original.is_file():
            continue
        expected = original.read_bytes()
        try:
            same = read_member(archive, rel, max_bytes=len(expected)) == expected  # anything larger differs
        except (FileNotFoundError, IsADirectoryError, MemberError):
            same = False  # deleted, or replaced by a folder, a link or something bigger
        if not same:
            changed.append(rel)
    return changed


# Reasons that follow from the record and the criteria alone, so a verdict made only of them can
# be cached by (record checksum, criteria). The others can change while the record does not: an
# env restored or rebuilt, an archive mended, a re-grade on a less busy machine.
RECORD_ONLY = frozenset(
    {
        "unreadable_record",
        "no_rounds",
        "unfinished",
        "infra_failure",
        "teacher_error",
        "budget_overrun",
        "no_improvement",
        "protocol",
        "missing_reflection",
        "repeated_actions",
        "unchanged_resubmits",
        "llm_judge",  # a paid rating: asking again draws another sample, not a truer verdict
        "llm_judge_gaming",
    }
    | {reason_of(kind) for kind in KINDS}  # read from the record (and the env its spec hash pins)
)

PRECONDITIONS: tuple[Criterion, ...] = (no_rounds, env_missing, env_changed)
CRITERIA: tuple[Criterion, ...] = (
    ending,
    below_baseline,
    best_below_baseline,
    no_improvement,
    protocol,
    missing_reflection,
    repeated_actions,
    unchanged_resubmits,
    hidden_content,
    exploit_attempts,
    snapshots_present,
    protected_files,
)
