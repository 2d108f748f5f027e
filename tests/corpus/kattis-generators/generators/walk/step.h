inline int step(unsigned long long& state) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (state & 1) ? 1 : -1;
}
