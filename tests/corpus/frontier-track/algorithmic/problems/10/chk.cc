// Checker for "Echo Sum": the output must be the sum of the input's numbers (pass or fail, no Ratio).
#include "testlib.h"

int main(int argc, char **argv) {
    registerTestlibCmd(argc, argv);
    long long want = ans.readLong();
    long long got = ouf.readLong();
    if (got != want) quitf(_wa, "expected %lld, got %lld", want, got);
    quitf(_ok, "correct");
}
