#!/usr/bin/env bash
# run_tests.sh - compile (if C++) and run a solution on every tests/*.in, compare with *.ans.
#
# Usage: bash run_tests.sh [solution file] [tests dir] [time limit s]
#   defaults: solution.cpp if present else solution.py, ./tests, 2 seconds
# For each NAME.in: runs the solution, writes NAME.out, compares with NAME.ans token by token
# (whitespace-insensitive). Missing .ans -> the output is only shown. Prints verdict and time.
# Exit code: 0 if nothing failed (no WA/RE/TLE), 1 otherwise, 2 on compile error/usage problem.
set -u
SRC=${1:-}
if [ -z "$SRC" ]; then
  if [ -f solution.cpp ]; then SRC=solution.cpp; else SRC=solution.py; fi
fi
TDIR=${2:-tests}; TL=${3:-2}
[ -f "$SRC" ] || { echo "no solution file $SRC"; exit 2; }
ls "$TDIR"/*.in > /dev/null 2>&1 || { echo "no $TDIR/*.in files; create them from the samples"; exit 2; }

case "$SRC" in
  *.cpp)
    BIN=./.run_tests_bin
    if ! g++ -O2 -std=c++17 -Wall -Wextra -Wshadow -o "$BIN" "$SRC" 2> .compile.log; then
      echo "COMPILE ERROR:"; head -n 30 .compile.log; exit 2
    fi
    grep -c warning .compile.log > /dev/null && { echo "(compiler warnings: see .compile.log)"; }
    RUN=("$BIN") ;;
  *.py) RUN=(python3 "$SRC") ;;
  *) echo "unknown solution type: $SRC"; exit 2 ;;
esac

fail=0; total=0; passed=0
for in in "$TDIR"/*.in; do
  name=${in%.in}; ans=$name.ans; out=$name.out
  start=$EPOCHREALTIME
  timeout "$TL" "${RUN[@]}" < "$in" > "$out" 2> "$name.err"; rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  if   [ $rc -eq 124 ]; then v="TLE (>${TL}s)"
  elif [ $rc -ne 0 ];   then v="RE (exit $rc; stderr: $name.err)"
  elif [ ! -f "$ans" ]; then v="ran (no .ans to compare)"
  elif cmp -s <(tr -s '[:space:]' '\n' < "$out" | sed '/^$/d') <(tr -s '[:space:]' '\n' < "$ans" | sed '/^$/d'); then v="OK"
  else v="WA"; fi
  [ -f "$ans" ] && total=$((total + 1))
  case "$v" in OK) passed=$((passed + 1)) ;; ran*) ;; *) fail=$((fail + 1)) ;; esac
  printf '%-28s %-40s %ss\n' "$(basename "$in")" "$v" "$secs"
  if [ "$v" = "WA" ]; then
    echo "   first differing tokens (line: expected | got):"
    paste -d'|' <(tr -s '[:space:]' '\n' < "$ans" | sed '/^$/d') <(tr -s '[:space:]' '\n' < "$out" | sed '/^$/d') \
      | awk -F'|' '$1 != $2 {print "   " NR ": " $1 " | " $2; if (++c == 5) exit}'
  fi
done
echo "passed $passed/$total tests with .ans; failures (WA/RE/TLE): $fail"
[ $fail -eq 0 ]
