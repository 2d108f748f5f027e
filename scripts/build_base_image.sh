#!/usr/bin/env bash
# Build the local base image `arex-base` (Debian bookworm + python3, pip, gcc/g++, git, and the judge's
# other languages: Java 17 (default-jdk-headless) and PyPy3) with
# debootstrap + docker import: no image registry is reachable from these machines.
# Idempotent: skips the build when an image with the same recipe hash exists.
# Usage: scripts/build_base_image.sh [--force]
set -euo pipefail

IMAGE="${AREX_BASE_IMAGE:-arex-base}"
SUITE=bookworm
MIRROR="${AREX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The recipe: change it and the image is rebuilt (the hash is stored as an image label).
# Judge languages (arex/grading/languages.py): gcc/g++ for C and C++, default-jdk-headless for Java
# (~+300 MB with its dependencies), pypy3 (~+75 MB). Debian bookworm packages no Python 2.
PACKAGES="python3,python3-pip,python3-venv,python3-dev,gcc,g++,make,git,ca-certificates,procps,psmisc,coreutils,time,default-jdk-headless,pypy3"
SANDBOX_UID=1000
recipe_hash=$(printf '%s|%s|%s|%s|v2' "$SUITE" "$PACKAGES" "$SANDBOX_UID" "$MIRROR" | sha256sum | cut -c1-16)

if [ "${1:-}" != "--force" ]; then
  have=$(docker image inspect "$IMAGE:latest" --format '{{ index .Config.Labels "arex.recipe" }}' 2>/dev/null || true)
  if [ "$have" = "$recipe_hash" ]; then
    echo "[arex] base image $IMAGE:latest is up to date (recipe $recipe_hash)"
    exit 0
  fi
fi

command -v debootstrap >/dev/null || { echo "[arex] debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
root=$(mktemp -d /var/tmp/arex-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "[arex] debootstrap $SUITE into $root (about a minute)..."
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 || {
  echo "[arex] debootstrap failed; last lines of $root.log:" >&2; tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"

# The unprivileged user every sandbox runs as, and its home/work folders.
chroot "$root" /usr/sbin/groupadd -g "$SANDBOX_UID" arex
chroot "$root" /usr/sbin/useradd -m -u "$SANDBOX_UID" -g "$SANDBOX_UID" -s /bin/bash arex
mkdir -p "$root/workspace" && chown "$SANDBOX_UID:$SANDBOX_UID" "$root/workspace"
# Debian marks its python as externally managed; images install task requirements with pip.
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
# Keep the image small: apt caches and docs are not needed at run time.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*

echo "[arex] importing into docker as $IMAGE:latest ..."
tar -C "$root" -c . | docker import \
  -c "LABEL arex.recipe=$recipe_hash" \
  -c "LABEL arex.managed=1" \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV LANG=C.UTF-8' \
  -c 'WORKDIR /workspace' \
  -c 'CMD ["/bin/bash"]' \
  - "$IMAGE:latest" >/dev/null
echo "[arex] built $IMAGE:latest (recipe $recipe_hash)"
