# Exit 42 if stdin is a valid input: n on a line, then n weights on one line, within the bounds;
# --max-n / --min-n bound n (input_validator_args of the test's group).
import sys

args = sys.argv[1:]
max_n = int(args[args.index("--max-n") + 1]) if "--max-n" in args else 100000
min_n = int(args[args.index("--min-n") + 1]) if "--min-n" in args else 1
lines = sys.stdin.read().split("\n")
try:
    n = int(lines[0])
    weights = [int(x) for x in lines[1].split(" ")]
except (ValueError, IndexError):
    sys.exit(43)
ok = min_n <= n <= max_n and len(weights) == n and all(abs(w) <= 10**9 for w in weights)
ok = ok and lines[2:] == [""]
sys.exit(42 if ok else 43)
