// Checker for "Echo Sum": the output must be the sum of the input's numbers (pass or fail, no Ratio).
// Like some of the benchmark's checkers, it FAILs (exit 3) on an output it cannot parse, which the
// benchmark's judge scores 0 for the case.
#include <cctype>
#include <string>
#include "testlib.h"

int main(int argc, char **argv) {
    registerTestlibCmd(argc, argv);
    long long want = ans.readLong();
    char buf[64] = "";
    if (!ouf.file || fscanf(ouf.file, "%63s", buf) != 1) quitf(_fail, "expected a number, found the end of the output");
    std::string got = buf;
    for (char c : got)
        if (!isdigit((unsigned char)c) && c != '-') quitf(_fail, "expected a number, found '%s'", buf);
    if (std::stoll(got) != want) quitf(_wa, "expected %lld, got %s", want, buf);
    quitf(_ok, "correct");
}
