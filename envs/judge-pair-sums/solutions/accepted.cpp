// arex-canary-2cce1b61f675486304e7f884cba3008f (private: must never appear in a trajectory)
#include <bits/stdc++.h>
int main() {
    int n; long long k;
    if (scanf("%d %lld", &n, &k) != 2) return 0;
    std::vector<long long> a(n);
    for (auto &x : a) scanf("%lld", &x);
    std::sort(a.begin(), a.end());
    long long count = 0;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        if (a[lo] + a[hi] <= k) { count += hi - lo; ++lo; } else { --hi; }
    }
    printf("%lld\n", count);
}
