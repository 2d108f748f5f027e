n, q = map(int, input().split())
raise RuntimeError("no idea")
