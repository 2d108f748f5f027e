#include <bits/stdc++.h>
// Read n, k and the n numbers from stdin; print the number of pairs i < j with a_i + a_j <= k.
int main() {
    int n; long long k;
    if (scanf("%d %lld", &n, &k) != 2) return 0;
    std::vector<long long> a(n);
    for (auto &x : a) scanf("%lld", &x);
    long long count = 0;
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j)
            if (a[i] + a[j] <= k) ++count;
    printf("%lld\n", count);
}
