data = open(0).read().split()
print(max(int(x) for x in data[1:]))
