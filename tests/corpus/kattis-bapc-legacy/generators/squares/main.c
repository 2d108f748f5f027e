#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) { printf("%s\n", argc > 1 ? argv[1] : "0"); return 0; }
