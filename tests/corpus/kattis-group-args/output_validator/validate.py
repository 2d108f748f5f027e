"""Accepts an output within --eps of the answer (default 1e-9): the tests give each group its own."""

import sys

args = sys.argv[4:]
eps = float(args[args.index("--eps") + 1]) if "--eps" in args else 1e-9
with open(sys.argv[2]) as f:
    answer = float(f.read())
tokens = sys.stdin.read().split()
try:
    value = float(tokens[0]) if len(tokens) == 1 else None
except ValueError:
    value = None
if value is None or abs(value - answer) > eps:
    with open(sys.argv[3] + "judgemessage.txt", "w") as f:
        f.write(f"expected {answer} within {eps}, got {' '.join(tokens)[:40]}")
    sys.exit(43)
sys.exit(42)
