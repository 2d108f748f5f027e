// fast_io_template.cpp - C++17 template with three input styles. Keep ONE style per program.
// Compile: g++ -O2 -std=c++17 -o sol fast_io_template.cpp
// Example input: "n" then n integers; prints their sum and the list reversed.
#include <bits/stdc++.h>
using namespace std;

// ---- Style B: buffered reader over fread (fastest; stdin only, no mixing with cin/scanf) ----
struct Reader {
    static const int SZ = 1 << 16;
    char buf[SZ];
    int len = 0, pos = 0;
    int getc_() {
        if (pos == len) { len = (int)fread(buf, 1, SZ, stdin); pos = 0; if (len <= 0) return -1; }
        return buf[pos++];
    }
    // Returns false at end of input. Handles negative numbers.
    template <class T> bool readInt(T &out) {
        int c = getc_();
        while (c != '-' && (c < '0' || c > '9')) { if (c == -1) return false; c = getc_(); }
        bool neg = false;
        if (c == '-') { neg = true; c = getc_(); }
        T x = 0;
        for (; c >= '0' && c <= '9'; c = getc_()) x = x * 10 + (c - '0');
        out = neg ? -x : x;
        return true;
    }
    bool readWord(string &s) {  // next whitespace-separated token
        s.clear();
        int c = getc_();
        while (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = getc_();
        if (c == -1) return false;
        for (; c != -1 && c != ' ' && c != '\n' && c != '\r' && c != '\t'; c = getc_()) s += (char)c;
        return true;
    }
};

// ---- Buffered writer: collect output in one string, write once at the end ----
struct Writer {
    string out;
    void writeInt(long long x) { out += to_string(x); }
    void ch(char c) { out += c; }
    void str(const string &s) { out += s; }
    ~Writer() { fwrite(out.data(), 1, out.size(), stdout); }
};

int main() {
#ifdef STYLE_A
    // ---- Style A: iostream, untied and unsynced (enough for ~1e6 numbers) ----
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    if (!(cin >> n)) return 0;
    vector<long long> a(n);
    for (auto &x : a) cin >> x;
    long long sum = accumulate(a.begin(), a.end(), 0LL);
    cout << sum << '\n';                       // '\n', never endl inside loops
    for (int i = n - 1; i >= 0; --i) cout << a[i] << (i ? ' ' : '\n');
#elif defined(STYLE_C)
    // ---- Style C: scanf/printf (do not mix with cin/cout once sync is off) ----
    int n;
    if (scanf("%d", &n) != 1) return 0;
    vector<long long> a(n);
    for (auto &x : a) scanf("%lld", &x);
    long long sum = accumulate(a.begin(), a.end(), 0LL);
    printf("%lld\n", sum);
    for (int i = n - 1; i >= 0; --i) printf("%lld%c", a[i], i ? ' ' : '\n');
#else
    // ---- Style B (default): fread reader + single fwrite ----
    static Reader in;
    Writer w;
    int n;
    if (!in.readInt(n)) return 0;
    vector<long long> a(n);
    for (auto &x : a) in.readInt(x);
    long long sum = accumulate(a.begin(), a.end(), 0LL);
    w.writeInt(sum); w.ch('\n');
    for (int i = n - 1; i >= 0; --i) { w.writeInt(a[i]); w.ch(i ? ' ' : '\n'); }
#endif
    return 0;
}
