// Checker for "Big Digit Sum": chk <input> <output> <answer> (testlib's exit codes: 0 accepted,
// 1 wrong answer, 3 checker failure, 7 partial with "Ratio: r").
#include <cctype>
#include <cstdio>
#include <string>

static bool read_number(FILE* f, std::string* s) {
    char buf[4096];
    if (fscanf(f, "%4095s", buf) != 1) return false;
    *s = buf;
    for (char c : *s) if (!isdigit((unsigned char)c)) return false;
    return !s->empty();
}

int main(int argc, char** argv) {
    if (argc < 4) { fprintf(stderr, "usage: chk input output answer\n"); return 3; }
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "r");
    long n;
    if (!in || !out || fscanf(in, "%ld", &n) != 1) { fprintf(stderr, "bad input\n"); return 3; }
    std::string x;
    if (!read_number(out, &x) || (long)x.size() > n) { fprintf(stderr, "wrong answer: not a number of at most N digits\n"); return 1; }
    long sum = 0;
    for (char c : x) sum += c - '0';
    double ratio = (double)sum / (9.0 * n);
    fprintf(stderr, "points %.6f Ratio: %.6f, RatioUnbounded: %.6f\n", ratio, ratio, ratio);
    return ratio >= 1.0 ? 0 : 7;
}
