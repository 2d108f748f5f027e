import sys

data = list(map(int, sys.stdin.read().split()))
n = data[0]
speeds = [data[1 + 2 * i] / data[2 + 2 * i] for i in range(n)]
print(f"{sum(speeds) / n:.9f}")
