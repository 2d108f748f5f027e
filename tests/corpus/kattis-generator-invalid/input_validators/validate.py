import sys

tokens = sys.stdin.read().split()
n = int(tokens[0])
sys.exit(42 if 1 <= n <= 100 and len(tokens) == n + 1 else 43)
