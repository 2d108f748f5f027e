import sys

data = sys.stdin.read().split()
print(int(data[1]))
