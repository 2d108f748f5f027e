import sys

values = list(map(int, sys.stdin.read().split()))[1:]
print(abs(values[-1] - values[0]))
