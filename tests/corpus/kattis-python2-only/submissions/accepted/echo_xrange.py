word = raw_input().strip()
for _ in xrange(1):
    print(word + " " + word)
