n = int(input())
low, high = 1, n
while True:
    y = (low + high) // 2
    print("?", y, flush=True)
    answer = input()
    if answer == "=":
        break
    if answer == "<":
        high = y - 1
    else:
        low = y + 1
print("!", y, flush=True)
