word = raw_input().strip()
print word, word
