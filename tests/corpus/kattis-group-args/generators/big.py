import random
import sys

random.seed(int(sys.argv[1]))
while True:
    n = random.randint(10**6, 10**12)
    if int(n**0.5) ** 2 != n:
        print(n)
        break
