// A folder generator: a walk of n steps of +-1 from 0, seeded by the second argument.
#include <cstdio>
#include <cstdlib>

#include "step.h"

int main(int argc, char** argv) {
    int n = std::atoi(argv[1]);
    unsigned long long state = std::strtoull(argv[2], nullptr, 10) | 1;
    std::printf("%d\n", n);
    for (int i = 0; i < n; i++) std::printf("%d%c", step(state), i + 1 < n ? ' ' : '\n');
    return 0;
}
