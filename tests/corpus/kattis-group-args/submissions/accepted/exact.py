import math

n = int(input())
r = math.isqrt(n)
print(r if r * r == n else f"{math.sqrt(n):.12f}")
