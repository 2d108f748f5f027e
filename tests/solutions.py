"""Solutions the scripted teacher writes in tests: known-good code for the bundled envs."""

import textwrap

# subset-fill: an exact subset-sum DP (scores 1.0; the greedy starter scores ~0.98).
EXACT_PY = textwrap.dedent(
    """
    import sys
    d = sys.stdin.read().split()
    n, c = int(d[0]), int(d[1])
    w = list(map(int, d[2:2 + n]))
    mask = (1 << (c + 1)) - 1
    layers = [1]
    for x in w:
        layers.append((layers[-1] | (layers[-1] << x)) & mask)
    s = layers[-1].bit_length() - 1
    picked = []
    for i in range(n, 0, -1):
        if not (layers[i - 1] >> s) & 1:
            picked.append(i)
            s -= w[i - 1]
    print(len(picked))
    print(*picked)
    """
)

# ml-diabetes: train on every feature instead of bmi alone (RMSE ~62 → below 60).
USE_ALL = (
    'sed -i \'s/features = \\["bmi"\\]/'
    'features = [c for c in train.columns if c not in ("id", "progression")]/\' train.py'
)
