#include "testlib.h"

int main(int argc, char **argv) {
    registerInteraction(argc, argv);
    long long n = inf.readLong(), hidden = inf.readLong(), best = ans.readLong();
    printf("%lld\n", n);
    fflush(stdout);
    for (long long asked = 0;;) {
        char op = ouf.readOp();
        long long y = ouf.readLong();
        if (op == '!') {
            if (y != hidden) quitf(_wa, "%lld is not the hidden number", y);
            fprintf(tout, "%lld\n", asked);
            if (asked <= best) quitf(_ok, "found with %lld questions. Ratio: 1.0000", asked);
            double ratio = (double)best / asked;
            quitp(ratio, "found with %lld questions. Ratio: %.4f", asked, ratio);
        }
        if (op != '?') quitf(_wa, "unknown request '%c'", op);
        if (++asked > 2 * n) quitf(_wa, "too many questions");
        printf("%s\n", hidden < y ? "<" : hidden > y ? ">" : "=");
        fflush(stdout);
    }
}
