// arex-canary-efb8a678bdeac9be9f9c3ce26ba002bb (private: must never appear in a trajectory)
#include <bits/stdc++.h>
int main() {  // exact: reachable sums with the item that first reached each sum
    int n, cap;
    if (scanf("%d %d", &n, &cap) != 2) return 0;
    std::vector<int> w(n);
    for (auto &x : w) scanf("%d", &x);
    std::vector<int> by(cap + 1, -1);  // by[s] = item that first reached sum s (-2 for s = 0)
    by[0] = -2;
    for (int i = 0; i < n; ++i)
        for (int s = cap; s >= w[i]; --s)
            if (by[s] == -1 && by[s - w[i]] != -1 && by[s - w[i]] != i) by[s] = i;
    int best = cap;
    while (by[best] == -1) --best;
    std::vector<int> picked;
    for (int s = best; s > 0; s -= w[by[s]]) picked.push_back(by[s] + 1);
    printf("%zu\n", picked.size());
    for (size_t i = 0; i < picked.size(); ++i) printf("%d%c", picked[i], i + 1 == picked.size() ? '\n' : ' ');
}
