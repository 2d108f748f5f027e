#!/usr/bin/env python3
"""Example random generator: `python3 gen_array.py SEED` prints "n k" and n integers.

Edit the ranges for your problem. Keep n tiny (the brute force must be fast and a small
failing case is easy to read); vary the ranges with the seed so that both dense
(many equal values) and sparse inputs appear.
"""
import random
import sys

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
rng = random.Random(seed)
n = rng.randint(2, 8)
hi = rng.choice([3, 10, 1000])          # small ranges -> many duplicates and ties
k = rng.randint(0, 2 * hi)
a = [rng.randint(0, hi) for _ in range(n)]
print(n, k)
print(*a)
