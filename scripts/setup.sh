#!/usr/bin/env bash
# One-command setup for arex on a Debian machine: Docker engine, base image, the package.
# Idempotent: each step checks first and skips what is already there.
#   AREX_EXTRAS  pip extras to install (default: test,local,ray)
#   PYTHON       interpreter to install into (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${AREX_EXTRAS:-test,local,ray}"
log() { echo "[arex setup] $*"; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

# 1. System packages: the Docker engine, debootstrap (for the locally built base image) and
#    headless Chromium (tests/report/test_report.py renders `arex report`'s pages with it).
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} ..."
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
fi

# 2. The engine. No bridge: containers run with no network, and must.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: /var/log/arex-dockerd.log) ..."
  $SUDO sh -c 'nohup dockerd --bridge=none --iptables=false >/var/log/arex-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/arex-dockerd.log"; tail -20 /var/log/arex-dockerd.log >&2; exit 1; }
fi
log "docker engine: $(docker version --format '{{.Server.Version}}')"

# 3. The base image, built locally (no image registry is reachable).
bash scripts/build_base_image.sh

# 4. The package and its extras, skipped when pyproject.toml has not changed since the last install.
# llama.cpp is compiled for a portable x86-64 feature set: a -march=native build can crash with a
# general-protection fault on virtual CPUs that advertise instructions (AMX) they do not allow.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON}"
mkdir -p .arex
stamp=".arex/setup-stamp"
want="$(sha256sum pyproject.toml | cut -c1-16) $EXTRAS $($PYTHON -c 'import sys; print(sys.executable)') $CMAKE_ARGS"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ "$(cd / && $PYTHON -c 'import arex, os; print(os.path.dirname(os.path.dirname(arex.__file__)))' 2>/dev/null)" = "$PWD" ]; then
  # (imported from outside the checkout: an editable install of another clone does not count)
  log "python package up to date"
else
  log "pip install -e .[$EXTRAS] (llama-cpp-python compiles once, ~5 min) ..."
  $PYTHON -m pip install -q -e ".[$EXTRAS]"
  if [[ ",$EXTRAS," == *",local,"* ]] && ! $PYTHON -m arex.teacher.local --smoke >/dev/null 2>&1; then
    log "llama-cpp-python crashes on this CPU (a wheel built elsewhere or for -march=native?); rebuilding portably ..."
    $PYTHON -m pip install -q --no-cache-dir --force-reinstall --no-deps "llama-cpp-python"
    $PYTHON -m arex.teacher.local --smoke
  fi
  echo "$want" > "$stamp"
fi
log "ready"
