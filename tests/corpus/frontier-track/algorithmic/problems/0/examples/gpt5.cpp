// A model's attempt: nines for a short number, fives for a long one.
#include <iostream>
#include <string>
int main() {
    int n;
    std::cin >> n;
    std::cout << std::string(n, n <= 3 ? '9' : '5') << "\n";
}
