"""Regenerates private/tests (deterministic). Run: python envs/judge-pair-sums/generate.py"""

import bisect
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE / "private" / "tests"


def solve(k: int, values: list[int]) -> int:
    values = sorted(values)
    count = 0
    for i, v in enumerate(values):
        count += max(0, bisect.bisect_right(values, k - v, 0, i))
    return count


def write(name: str, k: int, values: list[int]) -> None:
    (TESTS / f"{name}.in").write_text(f"{len(values)} {k}\n{' '.join(map(str, values))}\n")
    (TESTS / f"{name}.ans").write_text(f"{solve(k, values)}\n")


def main() -> None:
    TESTS.mkdir(parents=True, exist_ok=True)
    for old in TESTS.iterdir():
        old.unlink()
    write("sample-1", 5, [1, 2, 3, 4])
    write("sample-2", 10, [5, 5, 5])
    rng = random.Random(20261130)
    for i in range(1, 5):
        n = rng.randint(2, 1000)
        write(f"small-{i:02d}", rng.randint(0, 2000), [rng.randint(0, 1000) for _ in range(n)])
    write("small-05", 7, [7, 0, 0, 3, 4, 4])  # zeros and exact sums: the off-by-one trap
    for i in range(1, 4):
        n = 100_000
        write(f"large-{i:02d}", rng.randint(0, 2 * 10**9), [rng.randint(0, 10**9) for _ in range(n)])


if __name__ == "__main__":
    main()
