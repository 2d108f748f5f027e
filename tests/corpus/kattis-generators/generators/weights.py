import random


def weights(n):
    return [random.randint(-1000, 1000) for _ in range(n)]
