// Checker for "Heavy Crate": chk <input> <output> <answer>. The answer file holds the best known
// selection, in the output format; the score is the output's total over the answer's total.
// Exit codes as testlib's: 0 accepted, 1 wrong answer, 3 checker failure, 7 partial ("Ratio:").
#include <cstdio>
#include <vector>

static long long total(FILE* f, const std::vector<long long>& w, long long cap, const char** why) {
    long long k;
    if (fscanf(f, "%lld", &k) != 1 || k < 0 || k > (long long)w.size()) { *why = "bad count"; return -1; }
    std::vector<bool> used(w.size(), false);
    long long sum = 0;
    for (long long j = 0; j < k; j++) {
        long long i;
        if (fscanf(f, "%lld", &i) != 1 || i < 1 || i > (long long)w.size() || used[i - 1]) { *why = "unknown or repeated parcel"; return -1; }
        used[i - 1] = true;
        sum += w[i - 1];
    }
    if (sum > cap) { *why = "total over the capacity"; return -1; }
    return sum;
}

int main(int argc, char** argv) {
    if (argc < 4) { fprintf(stderr, "usage: chk input output answer\n"); return 3; }
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "r"), *ans = fopen(argv[3], "r");
    if (!in || !out || !ans) { fprintf(stderr, "cannot open a file\n"); return 3; }
    long long n, cap;
    if (fscanf(in, "%lld %lld", &n, &cap) != 2 || n < 1) { fprintf(stderr, "bad input\n"); return 3; }
    std::vector<long long> w(n);
    for (auto& x : w) if (fscanf(in, "%lld", &x) != 1) { fprintf(stderr, "bad input\n"); return 3; }
    const char* why = "";
    long long best = total(ans, w, cap, &why);
    if (best <= 0) { fprintf(stderr, "answer file invalid: %s\n", why); return 3; }
    long long got = total(out, w, cap, &why);
    if (got < 0) { fprintf(stderr, "wrong answer: %s\n", why); return 1; }
    double ratio = (double)got / (double)best;
    fprintf(stderr, "points %.6f Value: %lld. Ratio: %.6f, RatioUnbounded: %.6f\n", ratio > 1 ? 1.0 : ratio, got, ratio > 1 ? 1.0 : ratio, ratio);
    return ratio >= 1.0 ? 0 : 7;
}
