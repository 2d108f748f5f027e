import sys

data = sys.stdin.read().split()
n, capacity = int(data[0]), int(data[1])
weights = [int(x) for x in data[2 : 2 + n]]
order = sorted(range(n), key=lambda i: -weights[i])
picked, total = [], 0
for i in order:
    if total + weights[i] <= capacity:
        picked.append(i + 1)
        total += weights[i]
print(len(picked))
print(*picked)
