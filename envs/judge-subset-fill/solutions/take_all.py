import sys

n = int(sys.stdin.read().split()[0])
print(n)
print(*range(1, n + 1))
