"""MLE-bench's medal rule (arex.eval.medals), checked against thresholds worked out by hand from
kaggle.com/progression's table for every bracket of team counts, on the corpus leaderboards and on
made-up ones; the leaderboard file's faults each get one sentence naming it."""

from __future__ import annotations

import pytest
from repo_paths import CORPUS

from arex.eval.medals import LeaderboardError, any_medal_rate, rank, read_leaderboard, thresholds

MLEBENCH = CORPUS / "mlebench"


def test_corpus_leaderboards_thresholds_by_hand():
    survival = thresholds(read_leaderboard(MLEBENCH / "toy-survival" / "leaderboard.csv"))
    # 50 teams (under 100): gold = 5th (10%), silver = 10th (20%), bronze = 20th (40%); median of 25th and 26th.
    assert (survival.teams, survival.lower_is_better) == (50, False)
    assert (survival.gold, survival.silver, survival.bronze, survival.median) == (0.95, 0.9, 0.85, 0.8)
    fares = thresholds(read_leaderboard(MLEBENCH / "toy-fares" / "leaderboard.csv"))
    # 120 teams (100-249): gold = 10th, silver = 24th (20%), bronze = 48th (40%); lower is better (first < last).
    assert (fares.teams, fares.lower_is_better) == (120, True)
    assert (fares.gold, fares.silver, fares.bronze, fares.median) == (1.0, 2.0, 3.0, 4.0)


@pytest.mark.parametrize(
    "teams, gold, silver, bronze",
    [
        (7, 1, 1, 2),  # int(0.7) = 0 -> rank 1; int(1.4) = 1; int(2.8) = 2
        (99, 9, 19, 39),
        (100, 10, 20, 40),
        (249, 10, 49, 99),
        (250, 10, 50, 100),  # 10 + int(0.5)
        (999, 11, 50, 100),  # 10 + int(1.998)
        (1000, 12, 50, 100),  # 10 + 2, 5%, 10%
        (4321, 18, 216, 432),
    ],
)
def test_thresholds_are_the_scores_at_the_ranks_of_each_bracket(teams, gold, silver, bronze):
    ascending = [float(r) for r in range(1, teams + 1)]  # the score is the rank: lower is better
    limits = thresholds(ascending)
    assert (limits.gold, limits.silver, limits.bronze) == (gold, silver, bronze)
    assert limits.lower_is_better and limits.median == (teams + 1) / 2
    descending = thresholds([-x for x in ascending])  # higher is better: the same ranks
    assert (descending.gold, descending.silver, descending.bronze) == (-gold, -silver, -bronze)
    assert not descending.lower_is_better


@pytest.mark.parametrize(
    "score, label",
    [(0.975, "gold"), (0.95, "gold"), (0.925, "silver"), (0.9, "silver"), (0.875, "bronze"), (0.85, "bronze"),
     (0.825, "above median"), (0.8, "none"), (0.1, "none"), (None, "invalid")],
)  # fmt: skip
def test_a_threshold_reached_counts_the_median_must_be_beaten(score, label):
    limits = thresholds(read_leaderboard(MLEBENCH / "toy-survival" / "leaderboard.csv"))
    placed = rank(score, limits)
    assert placed.label == label
    assert placed.any_medal == (label in ("gold", "silver", "bronze"))
    assert placed.above_median == (score is not None and score > 0.8)


@pytest.mark.parametrize(
    "score, label",
    [(0.5, "gold"), (1.0, "gold"), (1.5, "silver"), (2.0, "silver"), (2.5, "bronze"), (3.0, "bronze"),
     (3.5, "above median"), (4.0, "none"), (9.0, "none")],
)  # fmt: skip
def test_lower_is_better_read_from_the_leaderboard(score, label):
    limits = thresholds(read_leaderboard(MLEBENCH / "toy-fares" / "leaderboard.csv"))
    assert rank(score, limits).label == label


def test_any_medal_rate_over_a_set():
    limits = thresholds([0.9, 0.8, 0.7, 0.6, 0.5])  # 5 teams: every medal at rank 1 or 2
    ranks = [rank(s, limits) for s in (0.95, 0.8, 0.75, None)]
    assert [r.label for r in ranks] == ["gold", "bronze", "above median", "invalid"]
    assert any_medal_rate(ranks) == 50.0 and any_medal_rate([]) == 0.0


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "does not exist; put the competition's final leaderboard there"),
        ("teamId,points\n1,0.5\n", "has no 'score' column (columns: teamId, points)"),
        ("teamId,score\n1,0.5\n2,n/a\n", "line 3: score 'n/a' is not a finite number"),
        ("teamId,score\n1,0.5\n2,\n", "line 3: score '' is not a finite number"),
        ("teamId,score\n", "has no teams"),
        (b"teamId,score\n1,\xff\n", "cannot be read as UTF-8 text"),
    ],
)
def test_a_leaderboard_that_cannot_be_ranked_is_one_sentence_naming_it(tmp_path, text, message):
    path = tmp_path / "leaderboard.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(LeaderboardError) as caught:
        read_leaderboard(path)
    assert str(path) in str(caught.value) and message in str(caught.value)
