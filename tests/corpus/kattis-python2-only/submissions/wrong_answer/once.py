print(input().strip())
