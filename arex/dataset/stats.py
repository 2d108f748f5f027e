"""What an export measured, for the dataset card: filled while rows stream past, so memory does not
grow with the number of trajectories."""

from __future__ import annotations

from dataclasses import dataclass, field

from arex.dataset.masks import TokenStats
from arex.record.trajectory import Header, Round, Trajectory
from arex.record.usage import Usage, reflection_budget, usage_of

REFLECTION_PARTS = ("review", "diagnose", "plan", "state")


@dataclass
class ExportStats:
    """What the card reports; filled while rows stream past."""

    trajectories: int = 0
    duplicates: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    by_env: dict[str, dict] = field(default_factory=dict)
    teachers: dict[str, dict] = field(default_factory=dict)
    configs: dict[str, dict] = field(default_factory=dict)
    shards: dict[str, dict] = field(default_factory=dict)
    """relative path → {rows, bytes, sha256}"""
    skipped_calls: int = 0
    """Unusable replies left out of the calls rows."""
    calls_left_out: int = 0
    """Calls rows left out because their token row was (over max_length, no loss, or refused)."""
    reflections: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(REFLECTION_PARTS + ("complete", "total"), 0)
    )
    """How many reflections had each section (and all four): measured, not promised."""
    tokens: dict[str, TokenStats] = field(default_factory=dict)
    """Per granularity, with `export.tokenizer`: token lengths and what max_length split or dropped."""
    tokenizer: dict | None = None
    """The tokenizer the token rows were made with: its name, vocabulary hash and chat template."""
    tool_trajectories: int = 0
    """Trajectories in the `tools` action format (their rows carry tool calls and `tools`)."""
    decontamination: dict | None = None
    """The evaluation sets checked, what overlaps them (at build and at export) and the trajectories left out."""
    usage: Usage = field(default_factory=Usage)
    """Every call the exported trajectories paid for (`arex.record.usage`)."""
    reflection_budgets: dict[tuple, int] = field(default_factory=dict)
    """(reflection_words, reflection max_tokens) as recorded -> trajectories."""

    def add_usage(self, trajectory: Trajectory) -> None:
        """What an exported trajectory's calls cost, and the reflection budget it ran under."""
        self.usage.add(usage_of(trajectory))
        budget = reflection_budget(trajectory)
        self.reflection_budgets[budget] = self.reflection_budgets.get(budget, 0) + 1

    def add(self, header: Header, rounds: list[Round]) -> None:
        """Aggregates only (sums, counts, per-round min/mean/max): memory does not grow with the count."""
        held = [r.held_out for r in rounds]
        env = self.by_env.setdefault(
            header.env_id,
            {
                "domain": header.domain or header.env_kind,
                "kind": header.env_kind,
                "trajectories": 0,
                "rounds": 0,
                "sum_first": 0.0,
                "sum_best": 0.0,
                "sum_final": 0.0,
                "improved": 0,
                "curve": [],
            },
        )
        env["trajectories"] += 1
        env["rounds"] += len(rounds)
        self.tool_trajectories += header.action_format == "tools"
        env["sum_first"] += held[0]
        env["sum_best"] += max(held)
        env["sum_final"] += held[-1]
        env["improved"] += max(held) > held[0]
        running = float("-inf")
        for index, value in enumerate(held):  # best so far by round: count, sum, min, max
            running = max(running, value)
            if index == len(env["curve"]):
                env["curve"].append([0, 0.0, running, running])
            point = env["curve"][index]
            point[0] += 1
            point[1] += running
            point[2], point[3] = min(point[2], running), max(point[3], running)
        for round_ in rounds:
            reflection = round_.end.reflection
            self.reflections["total"] += 1
            self.reflections["complete"] += reflection.complete
            for part in REFLECTION_PARTS:
                self.reflections[part] += bool(getattr(reflection, part).strip())
        teacher = header.teacher
        self.teachers.setdefault(
            f"{teacher.model} @ {teacher.base_url}", {**teacher.model_dump(), "sampling": header.sampling}
        )
        self.configs.setdefault(header.config_hash, header.config)
