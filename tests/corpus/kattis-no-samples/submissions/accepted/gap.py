import sys

values = list(map(int, sys.stdin.read().split()))[1:]
print(max(values) - min(values))
