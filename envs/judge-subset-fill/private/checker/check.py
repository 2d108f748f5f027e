"""testlib-style checker: check.py input output answer. Valid output → 'Ratio: r' (r = total / best)."""
import sys


def fail(code: int, message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def main() -> None:
    inp, out, ans = (open(p).read().split() for p in sys.argv[1:4])
    n, capacity = int(inp[0]), int(inp[1])
    weights = [int(x) for x in inp[2 : 2 + n]]
    best = int(ans[0])
    try:
        k = int(out[0])
        picked = [int(x) for x in out[1 : 1 + k]]
    except (ValueError, IndexError):
        fail(1, "wrong answer: expected k followed by k indices")
    if len(out) != 1 + k:
        fail(1, f"wrong answer: expected {k} indices, found {len(out) - 1}")
    if len(set(picked)) != k or any(not 1 <= i <= n for i in picked):
        fail(1, "wrong answer: indices must be distinct and within 1..n")
    total = sum(weights[i - 1] for i in picked)
    if total > capacity:
        fail(1, f"wrong answer: total {total} exceeds capacity {capacity}")
    ratio = total / best if best else 1.0
    print(f"points {ratio:.6f} Ratio: {ratio:.6f}, RatioUnbounded: {ratio:.6f}", file=sys.stderr)
    sys.exit(0 if ratio >= 1.0 else 7)


main()
