import offset

print(int(input()) + offset.SHIFT)
