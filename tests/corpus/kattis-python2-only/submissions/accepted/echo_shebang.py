#!/usr/bin/env python2
import sys
word = sys.stdin.readline().strip()
sys.stdout.write(word + " " + word + "\n")
