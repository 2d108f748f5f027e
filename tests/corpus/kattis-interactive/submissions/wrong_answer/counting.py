n, q = map(int, input().split())
y = 1
while True:
    print("?", y, flush=True)
    if input() == "=":
        break
    y += 1
print("!", y, flush=True)
