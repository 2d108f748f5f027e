// Checker for the "Digit Budget" problems: the output is a number of at most N digits (N: the
// input's first number); the answer file holds the reference's digit sum. Ratio: the output's
// digit sum over the reference's (capped at 1); RatioUnbounded: the same, uncapped.
#include "testlib.h"

int main(int argc, char **argv) {
    registerTestlibCmd(argc, argv);
    long long n = inf.readLong();
    long long reference = ans.readLong();
    std::string x = ouf.readToken();
    if ((long long)x.size() > n) quitf(_wa, "more than %lld digits", n);
    long long sum = 0;
    for (char c : x) {
        if (c < '0' || c > '9') quitf(_wa, "not a number");
        sum += c - '0';
    }
    double ratio = (double)sum / (double)reference;
    double bounded = ratio > 1 ? 1.0 : ratio;
    if (bounded >= 1.0) quitf(_ok, "Ratio: %.6f, RatioUnbounded: %.6f", bounded, ratio);
    quitp(bounded, "Ratio: %.6f, RatioUnbounded: %.6f", bounded, ratio);
}
