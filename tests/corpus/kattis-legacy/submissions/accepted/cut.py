length, piece = map(int, input().split())
print(length // piece, length % piece)
