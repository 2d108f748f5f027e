print("5" * int(input()))
