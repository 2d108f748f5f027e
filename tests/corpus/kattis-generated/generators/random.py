import random
import sys

random.seed(int(sys.argv[-1]))
print(random.randint(1, int(sys.argv[2])))
