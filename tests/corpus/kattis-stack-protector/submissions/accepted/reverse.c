#include <stdio.h>
#include <string.h>

int main(void) {
    char word[21];
    if (scanf("%20s", word) != 1) return 0;
    for (size_t i = strlen(word); i > 0; i--) putchar(word[i - 1]);
    putchar('\n');
    return 0;
}
