// A minimal stand-in for testlib, written for arex's test corpus: only the calls this track's
// checkers make, with testlib's calling convention (checker <input> <output> <answer>) and exit
// codes (0 ok, 1 wrong answer, 3 judge failure, 7 points; the message on stderr).
#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

enum TResult { _ok = 0, _wa = 1, _fail = 3, _points = 7 };

[[noreturn]] inline void finish(int code, const char *prefix, const char *format, va_list args) {
    fputs(prefix, stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    exit(code);
}

[[noreturn]] inline void quitf(TResult result, const char *format, ...) {
    va_list args;
    va_start(args, format);
    finish(result, result == _ok ? "ok " : result == _wa ? "wrong answer " : "FAIL ", format, args);
}

[[noreturn]] inline void quitp(double points, const char *format, ...) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "points %.4f ", points);
    va_list args;
    va_start(args, format);
    finish(_points, prefix, format, args);
}

struct InStream {
    FILE *file = nullptr;
    bool from_user = false;  // a bad token from the program is its wrong answer, from a file our failure
    long long readLong() {
        long long x;
        if (!file || fscanf(file, "%lld", &x) != 1) quitf(from_user ? _wa : _fail, "expected an integer");
        return x;
    }
    std::string readToken() {
        char buf[1 << 16];
        if (!file || fscanf(file, "%65535s", buf) != 1) quitf(from_user ? _wa : _fail, "unexpected end of file");
        return buf;
    }
};

inline InStream inf, ouf, ans;

inline void registerTestlibCmd(int argc, char **argv) {
    if (argc < 4) quitf(_fail, "usage: %s <input> <output> <answer>", argv[0]);
    inf.file = fopen(argv[1], "r");
    ouf.file = fopen(argv[2], "r"), ouf.from_user = true;
    ans.file = fopen(argv[3], "r");
    if (!inf.file || !ouf.file || !ans.file) quitf(_fail, "cannot open the test files");
}
