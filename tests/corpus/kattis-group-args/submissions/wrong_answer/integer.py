import math

print(round(math.sqrt(int(input()))))
