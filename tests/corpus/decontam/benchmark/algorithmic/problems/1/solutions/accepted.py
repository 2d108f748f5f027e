import sys
from collections import deque

def main():
    data = sys.stdin.read().split()
    n, m = int(data[0]), int(data[1])
    grid = data[2:2 + n]
    portals = {}
    for r in range(n):
        for c in range(m):
            if grid[r][c].islower():
                portals.setdefault(grid[r][c], []).append((r, c))
            if grid[r][c] == "S":
                start = (r, c)
    dist = {start: 0}
    queue = deque([start])
    used = set()
    while queue:
        r, c = queue.popleft()
        if grid[r][c] == "T":
            print(dist[(r, c)])
            return
        steps = [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
        letter = grid[r][c]
        if letter.islower() and letter not in used:
            used.add(letter)
            steps += portals[letter]
        for nr, nc in steps:
            if 0 <= nr < n and 0 <= nc < m and grid[nr][nc] != "#" and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    print(-1)

main()
