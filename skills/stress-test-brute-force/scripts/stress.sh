#!/usr/bin/env bash
# stress.sh - run a solution against a brute force on random inputs until they disagree.
#
# Usage:
#   bash stress.sh "<solution cmd>" "<brute cmd>" "<generator cmd>" [iterations] [per-run timeout s]
#
# The generator command is run as: <generator cmd> <seed>   (seed = 1, 2, 3, ...)
# and must print one test input to stdout. Both programs read that input on stdin.
# Outputs are compared token by token (whitespace-insensitive) unless CHECKER is set:
#   CHECKER="python3 check.py" bash stress.sh ...   -> runs: $CHECKER input sol_out brute_out
#   (exit code 0 = accepted). Use a checker when several answers are valid.
#
# Files are written to the current directory (or $STRESS_DIR):
#   stress_input.txt, stress_sol.out, stress_brute.out  (overwritten every iteration)
#   failing_input.txt                                   (saved on the first failure)
# Exit code: 0 = no mismatch found, 1 = mismatch/crash/timeout found, 2 = usage or setup error.
set -u

if [ $# -lt 3 ]; then
  sed -n '2,16p' "$0"
  exit 2
fi
SOL=$1; BRUTE=$2; GEN=$3; ITERS=${4:-500}; TLIM=${5:-5}
DIR=${STRESS_DIR:-.}
mkdir -p "$DIR"
IN="$DIR/stress_input.txt"; OS="$DIR/stress_sol.out"; OB="$DIR/stress_brute.out"
FAIL="$DIR/failing_input.txt"

normalize() { tr -s '[:space:]' '\n' < "$1" | sed '/^$/d'; }

report() {  # $1 = reason
  cp "$IN" "$FAIL"
  echo "=== FAILURE at seed $seed: $1 ==="
  echo "--- input (saved to $FAIL, first 20 lines) ---"; head -n 20 "$IN"
  echo "--- solution output (first 10 lines) ---";      head -n 10 "$OS"
  echo "--- brute output (first 10 lines) ---";         head -n 10 "$OB"
  echo "Reproduce: $SOL < $FAIL"
  exit 1
}

for ((seed = 1; seed <= ITERS; seed++)); do
  if ! bash -c "$GEN $seed" > "$IN" 2> "$DIR/stress_gen.err"; then
    echo "generator failed at seed $seed:"; head -n 20 "$DIR/stress_gen.err"; exit 2
  fi
  : > "$OS"; : > "$OB"
  timeout "$TLIM" bash -c "$BRUTE" < "$IN" > "$OB" 2> /dev/null
  rc=$?
  if [ $rc -ne 0 ]; then
    cp "$IN" "$FAIL"
    echo "brute force failed (exit $rc, 124 = timeout) at seed $seed; input saved to $FAIL"
    echo "Make the generator produce smaller inputs or fix the brute force."; exit 2
  fi
  timeout "$TLIM" bash -c "$SOL" < "$IN" > "$OS" 2> "$DIR/stress_sol.err"
  rc=$?
  [ $rc -eq 124 ] && report "solution timed out (> ${TLIM}s)"
  [ $rc -ne 0 ] && report "solution exited with code $rc (stderr in $DIR/stress_sol.err)"
  if [ -n "${CHECKER:-}" ]; then
    bash -c "$CHECKER \"$IN\" \"$OS\" \"$OB\"" > /dev/null 2>&1 || report "checker rejected the output"
  else
    if ! cmp -s <(normalize "$OS") <(normalize "$OB"); then report "outputs differ"; fi
  fi
  if (( seed % 100 == 0 )); then echo "ok: $seed tests passed"; fi
done
echo "no mismatch in $ITERS tests (try larger values or other generator modes if the judge still fails)"
exit 0
