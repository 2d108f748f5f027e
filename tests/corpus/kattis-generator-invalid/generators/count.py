import sys

n = int(sys.argv[1])
print(n)
print(*range(1, n + 1))
