import sys

data = sys.stdin.read().split()
n = int(data[0])
distance = sum(int(x) for x in data[1 : 2 * n + 1 : 2])
hours = sum(int(x) for x in data[2 : 2 * n + 2 : 2])
print(f"{distance / hours:.9f}")
