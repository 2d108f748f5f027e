"""`arex select`: keep or drop whole trajectories, each drop with its reason.

Cheap checks run first (ending, budgets, protocol, reflections, repetition, protected files,
scores against the baseline and the first round); the expensive ones (re-grading the first, the
best and the final round in a fresh sandbox, the optional LLM judge) run only on what is still
kept. Failed rounds inside a kept trajectory stay: they teach recovery.

Workspace snapshots are tar archives made inside the sandbox: they are read member by member
(arex.snapshots) or unpacked inside a fresh sandbox, never unpacked on the host.

Verdicts are cached by (record checksum, criteria hash) in `<out>/verdicts.jsonl`, so a re-run
re-grades nothing it already checked. A canary in any trajectory stops everything (LeakError).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path


from arex.canary import Canaries, LeakError, scan_archive, scan_file
from arex.envs.runtime import Env, list_envs
from arex.rollout.record import Loaded, load
from arex.sandbox import SandboxConfig, SandboxError
from arex.snapshots import MemberError, SnapshotError, SnapshotStore, read_member
from arex.teacher.client import TeacherClient, TeacherConfig

__all__ = ["LLMJudgeConfig", "LeakError", "SelectConfig", "Selection", "Verdict", "select"]


from arex.select_config import LLMJudgeConfig, SelectConfig  # noqa: E402 (re-exported)


@dataclass
class Verdict:
    key: str
    env_id: str
    path: str
    kept: bool
    reasons: list[str] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)
    scores: dict[str, float | None] = field(default_factory=dict)
    record_sha: str = ""
    criteria: str = ""


@dataclass
class Selection:
    kept: list[Verdict]
    dropped: list[Verdict]
    config: SelectConfig

    def drop_table(self) -> dict[str, dict]:
        """reason → {count, ids}; a trajectory dropped for two reasons counts under both."""
        table: dict[str, dict] = {}
        for verdict in self.dropped:
            for reason in verdict.reasons:
                row = table.setdefault(reason, {"count": 0, "ids": []})
                row["count"] += 1
                row["ids"].append(verdict.key)
        return dict(sorted(table.items()))

    def report(self) -> dict:
        return {
            "criteria": self.config.model_dump(),
            "criteria_hash": self.config.digest(),
            "total": len(self.kept) + len(self.dropped),
            "kept": len(self.kept),
            "dropped": len(self.dropped),
            "drops": self.drop_table(),
            "kept_ids": [v.key for v in self.kept],
        }


@dataclass
class Target:
    """A round select re-checks from its snapshot, with the names it goes by (first, best, last)."""

    end: dict
    archive: Path | None
    missing: str = ""  # why there is no archive
    labels: list[str] = field(default_factory=list)


# What reading a snapshot can raise, besides SandboxError: the archive or its file is bad.
SNAPSHOT_ERRORS = (ValueError, OSError, tarfile.TarError)


def targets_of(record: Loaded, path: Path) -> list[Target]:
    """The final, best and first rounds (one entry per round), each with its snapshot archive.

    The best is the round with the highest recorded held-out score: that is the score the
    criteria read, so that is the one whose re-grade must hold."""
    ends = [r["end"] for r in record.rounds]
    best = max(ends, key=lambda e: e["grade"]["held_out_score"])
    store = SnapshotStore(path.with_suffix("") / "snapshots")
    by_round: dict[int, Target] = {}
    for label, end in (("last", ends[-1]), ("best", best), ("first", ends[0])):
        if end["round"] not in by_round:
            by_round[end["round"]] = _target(end, store)
        by_round[end["round"]].labels.append(label)
    return list(by_round.values())


def _target(end: dict, store: SnapshotStore) -> Target:
    sha = end.get("snapshot")
    if sha is None:
        return Target(end, None, f"round {end['round']} has no workspace snapshot (the workspace could not be archived)")
    try:
        archive = store.path(sha)
    except ValueError as exc:
        return Target(end, None, f"round {end['round']}: {exc}")
    if not archive.is_file():
        return Target(end, None, f"round {end['round']}'s workspace snapshot {archive} is missing")
    return Target(end, archive)


def record_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _streak(items: list) -> int:
    best = run = 0
    previous = object()
    for item in items:
        run = run + 1 if item == previous else 1
        best, previous = max(best, run), item
    return best


class Selector:
    def __init__(self, config: SelectConfig, envs: dict[str, Env], sandbox: SandboxConfig, teacher: TeacherConfig | None = None):
        self.config, self.envs, self.sandbox = config, envs, sandbox
        self.teacher = teacher
        self.canaries = Canaries.of_envs(env.dir for env in envs.values())

    # -- one trajectory ------------------------------------------------------------------------
    def check(self, path: Path, sha: str | None = None) -> Verdict:
        scan_file(path, self.canaries)
        record = load(path)
        header = record.header or {}
        verdict = Verdict(key=header.get("key", path.stem), env_id=header.get("env_id", path.parent.name), path=str(path), kept=False, record_sha=sha or record_sha(path), criteria=self.config.digest())
        drop = self._drop_to(verdict)
        targets = targets_of(record, path) if record.rounds else []
        self._scan_snapshots(targets, drop)  # before any other check: a leak stops everything
        env = self.envs.get(verdict.env_id)
        if record.header is None or not record.rounds:
            drop("no_rounds", "the record has no complete round")
            return verdict
        if env is None:
            drop("env_missing", f"env '{verdict.env_id}' is not in the env store, so nothing can be re-checked")
            return verdict
        if env.spec_hash != header.get("spec_hash"):
            drop("env_changed", f"env spec hash {env.spec_hash} differs from the recorded {header.get('spec_hash')}")
            return verdict
        self._cheap_checks(record, env, verdict, drop)
        if self.config.check_protected and env.protected:
            self._check_protected(targets, env, drop)
        if not verdict.reasons and self.config.regrade:
            self._regrade(targets, env, verdict, drop)
        verdict.kept = not verdict.reasons
        return verdict

    @staticmethod
    def _drop_to(verdict: Verdict):
        def drop(reason: str, detail: str) -> None:
            if reason not in verdict.reasons:
                verdict.reasons.append(reason)
                verdict.details[reason] = detail

        return drop

    def _cheap_checks(self, record: Loaded, env: Env, verdict: Verdict, drop) -> None:
        c = self.config
        end = record.end
        if end is None or end["status"] == "interrupted":
            drop("unfinished", "the rollout has no ending yet; re-run `arex rollout` to finish it")
        elif end["status"] == "infra_failed":
            drop("infra_failure", end["reason"])
        elif end["status"] in ("teacher_error", "context_overflow"):
            drop("teacher_error", f"{end['status']}: {end['reason']}")
        elif end["status"] == "budget" and c.drop_budget_overrun:
            drop("budget_overrun", end["reason"])

        ends = [r["end"] for r in record.rounds]
        held = [e["grade"]["held_out_score"] for e in ends]
        baseline = env.baseline_score
        verdict.scores = {"first": held[0], "best": max(held), "final": held[-1], "baseline": baseline, "improvement": max(held) - held[0], "rounds": len(held)}
        if baseline is not None:
            if c.min_final_over_baseline is not None and held[-1] - baseline < c.min_final_over_baseline:
                drop("below_baseline", f"final held-out {held[-1]:.6g} vs baseline {baseline:.6g}")
            if c.min_best_over_baseline is not None and max(held) - baseline < c.min_best_over_baseline:
                drop("best_below_baseline", f"best held-out {max(held):.6g} vs baseline {baseline:.6g}")
        if c.min_improvement is not None and max(held) - held[0] < c.min_improvement:
            drop("no_improvement", f"best held-out {max(held):.6g} vs first round {held[0]:.6g}")

        unsubmitted = [e["round"] for e in ends if e["ending"] != "submitted"]
        if c.max_rounds_without_submit is not None and len(unsubmitted) > c.max_rounds_without_submit:
            drop("protocol", f"rounds {unsubmitted[:10]} ended without `submit` ({', '.join(sorted({e['ending'] for e in ends if e['ending'] != 'submitted'}))})")
        if c.reflection != "off":
            missing = [e["round"] for e in ends if not self._reflected(e)]
            if missing:
                drop("missing_reflection", f"rounds {missing[:10]} lack a {c.reflection} reflection")

        actions = [step["action"].get("command") or step["action"]["kind"] for r in record.rounds for step in r["steps"]]
        if c.max_repeat_streak is not None and _streak(actions) > c.max_repeat_streak:
            drop("repeated_actions", f"{_streak(actions)} identical actions in a row")
        submissions = [e["submission"] for e in ends]
        unchanged = _streak(submissions) - 1
        if c.max_unchanged_resubmits is not None and unchanged > c.max_unchanged_resubmits:
            drop("unchanged_resubmits", f"{unchanged} resubmissions in a row without a change")

    def _reflected(self, end: dict) -> bool:
        reflection = end["reflection"]
        if reflection["call"]["status"] != "ok" or not (reflection["call"]["content"] or "").strip():
            return False
        return self.config.reflection == "present" or bool(reflection.get("complete"))

    def _scan_snapshots(self, targets: list[Target], drop) -> None:
        """The canary check on each archive select uses; a missing one is judged by the checks that need it."""
        for target in targets:
            if target.archive is None:
                continue
            try:
                scan_archive(target.archive, self.canaries)
            except SNAPSHOT_ERRORS as exc:
                drop("bad_snapshot", f"round {target.end['round']}: {exc}")

    @staticmethod
    def _check_protected(targets: list[Target], env: Env, drop) -> None:
        """Protected files must be byte-identical in the final and the best workspace."""
        changed: list[str] = []
        for target in targets:
            labels = [label for label in target.labels if label in ("last", "best")]
            if not labels:
                continue
            if target.archive is None:
                drop("no_snapshot", f"{target.missing}, so its protected files cannot be checked")
                continue
            try:
                changed += [f"{rel} ({'/'.join(labels)})" for rel in _protected_changes(target.archive, env)]
            except SNAPSHOT_ERRORS as exc:
                drop("bad_snapshot", f"round {target.end['round']}: {exc}")
        if changed:
            drop("protected_file_changed", f"changed: {', '.join(sorted(changed))}")

    # -- re-grading ----------------------------------------------------------------------------
    def _regrade(self, targets: list[Target], env: Env, verdict: Verdict, drop) -> None:
        """Re-grade the final, best and first rounds; every score the criteria read must hold."""
        tolerance = self.config.tolerance.get(env.kind, 0.0)
        for target in targets:
            end = target.end
            if target.archive is None:
                drop("no_snapshot", f"{target.missing}, so it cannot be re-graded")
                return
            try:
                grade = self._grade_again(env, target.archive, end)
            except SnapshotError as exc:
                drop("bad_snapshot", f"round {end['round']}: {exc}")
                return
            except (SandboxError, *SNAPSHOT_ERRORS) as exc:
                drop("not_reproducible", f"round {end['round']} could not be re-graded: {exc}")
                return
            if grade.infra_error:
                drop("not_reproducible", f"round {end['round']}: re-grading failed: {grade.infra_error}")
                return
            recorded = end["grade"]["held_out_score"]
            for label in target.labels:
                verdict.scores[f"regraded_{label}"] = grade.held_out_score
            if abs(grade.held_out_score - recorded) > tolerance:
                drop("not_reproducible", f"round {end['round']}: recorded held-out {recorded:.6g}, re-graded {grade.held_out_score:.6g} (tolerance {tolerance:g})")
                return

    def _grade_again(self, env: Env, archive: Path, end: dict):
        return env.regrade(archive, end, self.sandbox)

    # -- optional LLM judge ----------------------------------------------------------------------
    async def llm_judge(self, verdicts: list[Verdict]) -> None:
        """Rate every verdict still kept, concurrently, with a client that lives in this loop."""
        if self.teacher is None or not self.teacher.base_url:
            raise ValueError("select.llm_judge.enabled needs a teacher endpoint: set teacher.base_url (e.g. from `arex teacher serve`)")
        client = TeacherClient(self.teacher)
        try:
            await asyncio.gather(*(self._llm_judge_one(client, v) for v in verdicts if v.kept))
        finally:
            await client.close()

    async def _llm_judge_one(self, client: TeacherClient, verdict: Verdict) -> None:
        cfg = self.config.llm_judge
        record, env = load(Path(verdict.path)), self.envs[verdict.env_id]
        lines = []
        for r in record.rounds:
            end = r["end"]
            actions = "; ".join((s["action"].get("command") or s["action"]["kind"])[:120] for s in r["steps"])
            lines.append(f"Round {end['round']}: public {end['grade']['public_score']:.4g}. Actions: {actions}\nReflection: {end['reflection']['call']['content'][:800]}")
        summary = "\n".join(lines)[-cfg.summary_chars :]
        call = await client.chat([{"role": "user", "content": cfg.prompt.format(title=env.title, summary=summary)}])
        drop = self._drop_to(verdict)
        match = re.search(r"SCORE:\s*(\d+)", call.content or "")
        if match is None:
            drop("llm_judge", f"the judge's reply had no SCORE: {(call.content or '')[:200]!r}")
        else:
            verdict.scores["llm_judge"] = int(match.group(1))
            if int(match.group(1)) < cfg.min_score:
                drop("llm_judge", f"rated {match.group(1)} < {cfg.min_score}")
        verdict.kept = not verdict.reasons


def _protected_changes(archive: Path, env: Env) -> list[str]:
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


# -- the whole store -----------------------------------------------------------------------------
def trajectory_files(store: Path) -> list[Path]:
    if not store.is_dir():
        raise FileNotFoundError(f"trajectory store {store} does not exist; run `arex rollout --out {store}` first")
    return sorted(store.glob("*/*.jsonl"))


def select(
    store: Path, envs_dir: Path, out: Path, config: SelectConfig, sandbox: SandboxConfig, teacher: TeacherConfig | None = None, on_verdict=None, concurrency: int = 2
) -> Selection:
    """Judge every trajectory in `store`; write `out/selection.json`, `out/kept.jsonl`, `out/drops.md`.
    Trajectories are checked `concurrency` at a time (re-grading waits on containers)."""
    envs = {env.id: env for env in list_envs(envs_dir)} if envs_dir.is_dir() else {}
    if not envs:
        raise FileNotFoundError(f"no built envs in {envs_dir}; selection re-grades against them (arex build-envs ... --out {envs_dir})")
    selector = Selector(config, envs, sandbox, teacher)
    files = trajectory_files(store)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "verdicts.jsonl"
    cached: dict[tuple[str, str], dict] = {}
    if cache_path.is_file():
        for line in cache_path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            cached[(row["record_sha"], row["criteria"])] = row

    def judged(path: Path) -> tuple[Verdict, bool]:
        sha = record_sha(path)
        row = cached.get((sha, config.digest()))
        if row is not None:
            scan_file(path, selector.canaries)  # a cached verdict is no excuse to skip the leak check
            return Verdict(**{**row, "path": str(path)}), True
        return selector.check(path, sha), False

    verdicts: list[Verdict] = []
    awaiting_judge: list[Verdict] = []
    with cache_path.open("a", encoding="utf-8") as cache, ThreadPoolExecutor(max(1, concurrency)) as pool:
        def remember(verdict: Verdict) -> None:
            cache.write(json.dumps(asdict(verdict)) + "\n")
            cache.flush()

        for verdict, from_cache in pool.map(judged, files):  # in file order; a kill keeps what was judged
            verdicts.append(verdict)
            if not from_cache and verdict.kept and config.llm_judge.enabled:
                awaiting_judge.append(verdict)  # judged below, all in one event loop
                continue
            if not from_cache:
                remember(verdict)
            if on_verdict:
                on_verdict(verdict)
        if awaiting_judge:
            asyncio.run(selector.llm_judge(awaiting_judge))
            for verdict in awaiting_judge:
                remember(verdict)
                if on_verdict:
                    on_verdict(verdict)
    selection = Selection([v for v in verdicts if v.kept], [v for v in verdicts if not v.kept], config)
    _write(selection, out, store, envs_dir)
    return selection


def _write(selection: Selection, out: Path, store: Path, envs_dir: Path) -> None:
    report = {**selection.report(), "store": str(store.resolve()), "envs": str(envs_dir.resolve())}
    (out / "selection.json").write_text(json.dumps(report, indent=2) + "\n")
    with (out / "kept.jsonl.tmp").open("w", encoding="utf-8") as handle:
        for v in selection.kept:
            handle.write(json.dumps({"key": v.key, "env_id": v.env_id, "path": str(Path(v.path).resolve()), "scores": v.scores}) + "\n")
    shutil.move(out / "kept.jsonl.tmp", out / "kept.jsonl")
    lines = ["| reason | dropped | ids |", "|---|---:|---|"]
    for reason, row in selection.drop_table().items():
        ids = ", ".join(row["ids"][:8]) + (" …" if len(row["ids"]) > 8 else "")
        lines.append(f"| {reason} | {row['count']} | {ids} |")
    (out / "drops.md").write_text(f"kept {len(selection.kept)} of {len(selection.kept) + len(selection.dropped)}\n\n" + "\n".join(lines) + "\n")
