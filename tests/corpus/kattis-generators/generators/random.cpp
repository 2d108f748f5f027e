// A list of n weights, random from the seed (the last argument).
#include <cstdio>
#include <cstdlib>
#include <random>

int main(int argc, char** argv) {
    if (argc < 3) return 1;
    int n = std::atoi(argv[1]);
    std::mt19937_64 rng(std::strtoull(argv[2], nullptr, 10));
    std::uniform_int_distribution<long long> weight(-1000000000LL, 1000000000LL);
    std::printf("%d\n", n);
    for (int i = 0; i < n; i++) std::printf("%lld%c", weight(rng), i + 1 < n ? ' ' : '\n');
    return 0;
}
