# Writes both files itself: the solution is not asked for this test's answer.
with open("testcase.in", "w") as f:
    f.write("2\n1000000000 1000000000\n")
with open("testcase.ans", "w") as f:
    f.write("2000000000\n")
