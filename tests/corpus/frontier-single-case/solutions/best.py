print("9" * int(input()))
