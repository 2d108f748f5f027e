// A checker for the decontamination corpus (never compiled by the tests that read this corpus):
// chk <input> <output> <answer>, exit 0 when the output's tokens equal the answer's.
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
    if (argc < 4) return 3;
    FILE *out = fopen(argv[2], "r"), *ans = fopen(argv[3], "r");
    char a[256], b[256];
    while (true) {
        int x = fscanf(out, "%255s", a), y = fscanf(ans, "%255s", b);
        if (x != y) return 1;
        if (x != 1) return 0;
        if (strcmp(a, b) != 0) return 1;
    }
}
