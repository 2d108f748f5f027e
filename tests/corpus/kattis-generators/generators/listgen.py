import random
import sys

from weights import weights

n, seed = int(sys.argv[1]), int(sys.argv[2])
random.seed(seed)
print(n)
print(*weights(n))
