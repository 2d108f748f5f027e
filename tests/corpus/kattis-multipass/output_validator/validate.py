import sys

# Pass 1: the team must print 2x; the next pass's input is that value. Pass 2: print x again.
sys.exit(43)
