#!/usr/bin/env bash
# repo_overview.sh - one-screen map of a code repository (read-only; writes nothing).
# Usage: bash repo_overview.sh [repo dir]   (default: current directory)
# Sections: layout, largest code files, docs, entry points, CLI options, outputs written,
# data read, dependencies, tests. Pipe to a file if long: bash repo_overview.sh > /tmp/overview.txt
set -u
R=${1:-.}
cd "$R" || exit 2
PRUNE=( -name .git -o -name __pycache__ -o -name .pytest_cache -o -name .mypy_cache -o -name .ipynb_checkpoints -o -name node_modules -o -name .venv -o -name venv -o -name '*.egg-info' )
code() { find . \( "${PRUNE[@]}" \) -prune -o -type f \( -name '*.py' -o -name '*.sh' -o -name '*.cpp' -o -name '*.ipynb' \) -print; }

echo "## layout (depth 2, first 60 entries)"
find . \( "${PRUNE[@]}" \) -prune -o -maxdepth 2 -print | sed 's|^\./||' | sort | head -n 60
echo; echo "## data files (csv/parquet/json/npy, first 15, with sizes)"
find . \( "${PRUNE[@]}" \) -prune -o -type f \( -name '*.csv' -o -name '*.parquet' -o -name '*.json' -o -name '*.npy' -o -name '*.pkl' \) -print0 \
  | xargs -0 -r du -h 2>/dev/null | sort -rh | head -n 15
echo; echo "## code files by size (lines)"
code | xargs -r wc -l 2>/dev/null | sort -rn | head -n 15
echo; echo "## docs and configs"
find . \( "${PRUNE[@]}" \) -prune -o -maxdepth 2 -type f \( -iname 'readme*' -o -name '*.md' -o -name '*.yaml' -o -name '*.yml' -o -name '*.toml' -o -name '*.cfg' -o -name 'Makefile' \) -print | head -n 20
echo; echo "## entry points (__main__ guards, scripts with top-level code)"
grep -rln --include='*.py' '__main__' . 2>/dev/null | head -n 20
echo; echo "## command-line options"
grep -rn --include='*.py' -E 'add_argument\(|click\.option|typer\.Option|sys\.argv' . 2>/dev/null | head -n 25
echo; echo "## outputs written (to_csv / savetxt / open(..., 'w') / save)"
grep -rn --include='*.py' -E "to_csv\(|savetxt\(|np\.save\(|\.to_parquet\(|open\([^)]*['\"]w|joblib\.dump|torch\.save|pickle\.dump" . 2>/dev/null | head -n 20
echo; echo "## data read"
grep -rn --include='*.py' -E "read_csv\(|read_parquet\(|np\.load\(|open\([^)]*\.(csv|json|txt)|load_dataset\(" . 2>/dev/null | head -n 20
echo; echo "## models / estimators mentioned"
grep -rho --include='*.py' -E '\b[A-Z][A-Za-z]*(Regressor|Classifier|Regression|Boost[A-Za-z]*|Forest[A-Za-z]*|SVC|SVR|Ridge|Lasso|KMeans|Pipeline)\b' . 2>/dev/null \
  | sort | uniq -c | sort -rn | head -n 15
echo; echo "## randomness and seeds"
grep -rn --include='*.py' -E 'random_state|seed\(|manual_seed' . 2>/dev/null | head -n 10
echo; echo "## dependencies"
for f in requirements*.txt pyproject.toml setup.py environment.yml; do [ -f "$f" ] && { echo "-- $f"; head -n 25 "$f"; }; done
echo; echo "## tests"
find . \( "${PRUNE[@]}" \) -prune -o -type f \( -name 'test_*.py' -o -name '*_test.py' \) -print | head -n 15
echo; echo "## TODO / FIXME / HACK notes"
grep -rn --include='*.py' -E 'TODO|FIXME|HACK|XXX' . 2>/dev/null | head -n 10
