#!/usr/bin/env python3
"""float_compare.py - compare two outputs token by token with a numeric tolerance.

    python3 float_compare.py OUT ANS [--eps 1e-6]
    python3 float_compare.py IN OUT ANS                    # stress.sh CHECKER form (IN ignored)
    CHECKER="python3 /skills/numerical-precision/scripts/float_compare.py" bash stress.sh ...

A token pair matches if both parse as numbers and |a-b| <= eps * max(1, |b|) (absolute
OR relative error within eps, the usual judge rule), or if the strings are equal.
Exit 0 = match; 1 = mismatch (first differences are printed to stderr).
"""
import math
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--eps")]
    eps = 1e-6
    for i, a in enumerate(sys.argv):
        if a.startswith("--eps"):
            eps = float(a.split("=", 1)[1]) if "=" in a else float(sys.argv[i + 1])
            if "=" not in a:
                args.remove(sys.argv[i + 1])
    if len(args) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    out_path, ans_path = args[-2], args[-1]
    out = open(out_path).read().split()
    ans = open(ans_path).read().split()
    bad = 0
    if len(out) != len(ans):
        print(f"token count differs: got {len(out)}, expected {len(ans)}", file=sys.stderr)
        bad += 1
    worst = 0.0
    for k, (o, a) in enumerate(zip(out, ans)):
        if o == a:
            continue
        try:
            x, y = float(o), float(a)
        except ValueError:
            x = y = None
        if x is not None and math.isfinite(x) and math.isfinite(y):
            err = abs(x - y) / max(1.0, abs(y))
            worst = max(worst, err)
            if err <= eps:
                continue
        bad += 1
        if bad <= 5:
            print(f"token {k + 1}: got {o!r}, expected {a!r}", file=sys.stderr)
    if bad == 0 and worst > 0:
        print(f"match (max scaled error {worst:.3g} <= {eps:g})", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
