import math

n = int(input())
r = math.isqrt(n)
if r * r == n:
    print(r)
elif n < 10**6:
    print(f"{math.sqrt(n):.2f}")
else:
    print(round(math.sqrt(n)))
