// The reference: an 8 for every digit allowed.
#include <iostream>
#include <string>
int main() {
    int n;
    std::cin >> n;
    std::cout << std::string(n, '8') << "\n";
}
