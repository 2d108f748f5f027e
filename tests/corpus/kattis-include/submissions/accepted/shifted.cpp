#include <cstdio>

#include "offset.h"

int main() {
    long long x;
    if (std::scanf("%lld", &x) != 1) return 1;
    std::printf("%lld\n", x + SHIFT);
}
