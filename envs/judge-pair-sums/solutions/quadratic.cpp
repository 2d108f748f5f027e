#include <bits/stdc++.h>
int main() {  // correct but O(n^2): passes the small subtask only
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
