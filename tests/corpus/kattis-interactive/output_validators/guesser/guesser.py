"""Interactor for Higher or Lower (Kattis protocol: input, answer, feedback folder; 42 / 43)."""
import sys

n, q = map(int, open(sys.argv[1]).read().split())
hidden = int(open(sys.argv[2]).read())


def verdict(accepted, why):
    with open(sys.argv[3] + "judgemessage.txt", "w") as out:
        out.write(why + "\n")
    sys.exit(42 if accepted else 43)


print(n, q, flush=True)
asked = 0
while True:
    line = sys.stdin.readline().split()
    # ASCII digits, at most 18 of them: "²" is a digit to isdigit() and 5,000 digits are a number
    # to it, but int() refuses both, and a crash is no verdict (an interactor must reject them).
    if len(line) != 2 or line[0] not in "?!" or not (line[1].isascii() and line[1].isdigit() and len(line[1]) < 19):
        verdict(False, "expected '? y' or '! x', got %r" % " ".join(line)[:30])
    y = int(line[1])
    if line[0] == "!":
        verdict(y == hidden, "correct" if y == hidden else "the number was not %d" % y)
    asked += 1
    if asked > q:
        verdict(False, "too many questions")
    print("<" if hidden < y else ">" if hidden > y else "=", flush=True)
