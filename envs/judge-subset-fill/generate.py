"""Regenerates private/tests (deterministic). Run: python envs/judge-subset-fill/generate.py"""

import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE / "private" / "tests"


def best(capacity: int, weights: list[int]) -> int:
    reach = 1
    mask = (1 << (capacity + 1)) - 1
    for w in weights:
        reach = (reach | (reach << w)) & mask
    return reach.bit_length() - 1


def write(name: str, capacity: int, weights: list[int]) -> None:
    (TESTS / f"{name}.in").write_text(f"{len(weights)} {capacity}\n{' '.join(map(str, weights))}\n")
    (TESTS / f"{name}.ans").write_text(f"{best(capacity, weights)}\n")


def main() -> None:
    TESTS.mkdir(parents=True, exist_ok=True)
    for old in TESTS.iterdir():
        old.unlink()
    write("sample-1", 10, [6, 5, 5, 3])
    rng = random.Random(11302026)
    for i in range(1, 9):
        capacity = rng.randint(10_000, 100_000)
        n = rng.randint(20, 40)
        write(f"main-{i:02d}", capacity, [rng.randint(capacity // 4, capacity // 2) for _ in range(n)])


if __name__ == "__main__":
    main()
