# arex-canary-2cce1b61f675486304e7f884cba3008f (private: must never appear in a trajectory)
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n, k = int(data[0]), int(data[1])
    a = sorted(map(int, data[2 : 2 + n]))
    count, lo, hi = 0, 0, n - 1
    while lo < hi:
        if a[lo] + a[hi] <= k:
            count += hi - lo
            lo += 1
        else:
            hi -= 1
    print(count)


main()
