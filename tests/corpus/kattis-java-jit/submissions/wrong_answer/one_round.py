# Only the first round: wrong whenever there are more.
n, t = map(int, input().split())
total = 0
for i in range(n):
    a = ((i * 2654435761) >> 7) & 0xFFFFFFFF
    a = a - (1 << 32) if a >= 1 << 31 else a
    total += 31 * a + (a ^ 0)
total &= 0xFFFFFFFF
print(total - (1 << 32) if total >= 1 << 31 else total)
