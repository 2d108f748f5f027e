"""MLE-bench's medal rule: a competition's leaderboard (scores in rank order, best first) gives the
gold, silver and bronze thresholds by rank, as Kaggle's progression system sets them for the number
of teams, and the median; a score earns the best medal whose threshold it reaches (ties count) and
is above the median only when strictly better than it. Whether lower is better is read from the
leaderboard itself (its first score below its last), as MLE-bench reads it.

Pure functions, no pandas: `read_leaderboard` refuses a file it cannot rank with one sentence.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from arex.errors import UserInputError

MEDALS = ("gold", "silver", "bronze")
ROUNDING = 5
"""MLE-bench rounds a grader's score to 5 decimals before ranking it."""


class LeaderboardError(UserInputError):
    """A leaderboard.csv that cannot be ranked; the message names the file and what to fix."""


@dataclass(frozen=True)
class Thresholds:
    gold: float
    silver: float
    bronze: float
    median: float
    lower_is_better: bool
    teams: int


@dataclass(frozen=True)
class Rank:
    """Where one score lands: its medal (None: none) and whether it beats the median."""

    score: float | None
    medal: str | None
    above_median: bool

    @property
    def any_medal(self) -> bool:
        return self.medal is not None

    @property
    def label(self) -> str:
        """The medal, else 'above median' or 'none' (an invalid submission: 'invalid')."""
        if self.score is None:
            return "invalid"
        return self.medal or ("above median" if self.above_median else "none")


def read_leaderboard(path: Path) -> list[float]:
    """The `score` column of `path`, in file order (Kaggle's rank order, best first)."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise LeaderboardError(
            f"{path} does not exist; put the competition's final leaderboard there (CSV with a 'score' column, "
            "best team first)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LeaderboardError(f"{path} cannot be read as UTF-8 text ({exc}); save it as a UTF-8 CSV") from None
    reader = csv.DictReader(io.StringIO(text))
    if "score" not in (reader.fieldnames or []):
        found = ", ".join(reader.fieldnames or []) or "none"
        raise LeaderboardError(f"{path} has no 'score' column (columns: {found}); add the teams' scores as 'score'")
    scores = []
    for row in reader:
        value = (row.get("score") or "").strip()
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise LeaderboardError(
                f"{path} line {reader.line_num}: score {value!r} is not a finite number; "
                "remove the teams without a score or fix the value"
            )
        scores.append(number)
    if not scores:
        raise LeaderboardError(f"{path} has no teams; a leaderboard needs at least one scored row")
    return scores


def thresholds(scores: list[float]) -> Thresholds:
    """The medal thresholds of a leaderboard in rank order (MLE-bench's rule, from kaggle.com/progression):
    under 100 teams the top 10% / 20% / 40%; 100-249: 10th place, 20%, 40%; 250-999: 10th + 0.2% of the
    teams, 50th, 100th; 1000 or more: 10th + 0.2%, 5%, 10%. A position is a rank (1 = first row)."""
    n = len(scores)
    if n == 0:
        raise ValueError("a leaderboard needs at least one team")

    def at(position: int) -> float:
        return scores[max(1, position) - 1]

    if n < 100:
        gold, silver, bronze = at(int(n * 0.1)), at(int(n * 0.2)), at(int(n * 0.4))
    elif n < 250:
        gold, silver, bronze = at(10), at(int(n * 0.2)), at(int(n * 0.4))
    elif n < 1000:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(50), at(100)
    else:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(int(n * 0.05)), at(int(n * 0.1))
    return Thresholds(
        gold=gold,
        silver=silver,
        bronze=bronze,
        median=statistics.median(scores),
        lower_is_better=scores[0] < scores[-1],
        teams=n,
    )


def rank(score: float | None, limits: Thresholds) -> Rank:
    """The medal `score` earns (None: an invalid submission, which earns nothing)."""
    if score is None:
        return Rank(None, None, False)

    def reaches(threshold: float) -> bool:
        return score <= threshold if limits.lower_is_better else score >= threshold

    medal = next((m for m in MEDALS if reaches(getattr(limits, m))), None)
    above = score < limits.median if limits.lower_is_better else score > limits.median
    return Rank(score, medal, above)


def any_medal_rate(ranks: list[Rank]) -> float:
    """The share of competitions (in %) with any medal: MLE-bench's headline over a set."""
    return 100.0 * sum(r.any_medal for r in ranks) / len(ranks) if ranks else 0.0
