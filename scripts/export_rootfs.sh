#!/usr/bin/env bash
# Make the root filesystem the `unshare` sandbox backend starts from, out of a Docker image:
#   bash scripts/export_rootfs.sh [IMAGE [FOLDER]]
# IMAGE defaults to arex-base:latest; FOLDER to $AREX_CACHE/rootfs/<IMAGE with / and : as _>
# ($AREX_CACHE defaults to ~/.cache/arex), the folder `sandbox.image: IMAGE` names for that backend.
# The folder gets rootfs/ (the image's files with their owners: run as root), config.json (the
# image's config, for its environment) and image-id. Idempotent: a folder already made from the
# same image id is left as it is; one from an older id is replaced. Prints the folder.
set -euo pipefail

image=${1:-arex-base:latest}
cache=${AREX_CACHE:-$HOME/.cache/arex}
dest=${2:-$cache/rootfs/$(printf '%s' "$image" | sed 's/[^A-Za-z0-9._-]/_/g')}

if [ "$(id -u)" != 0 ]; then
  echo "export_rootfs.sh: run as root (the rootfs keeps the image's file owners, e.g. a root-only /etc/shadow)" >&2
  exit 1
fi
id=$(docker image inspect --format '{{.Id}}' "$image") || {
  echo "export_rootfs.sh: no Docker image '$image' (build it first, e.g. bash scripts/build_base_image.sh)" >&2
  exit 1
}
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9  # one exporter per folder at a time
if [ -f "$dest/image-id" ] && [ "$(cat "$dest/image-id")" = "$id" ] && [ -d "$dest/rootfs/usr" ]; then
  echo "$dest"
  exit 0
fi

staging=$(mktemp -d "$dest.tmp.XXXXXX")
container=""
cleanup() {
  if [ -n "$container" ]; then docker rm -f "$container" >/dev/null 2>&1 || true; fi
  rm -rf "$staging"
}
trap cleanup EXIT
container=$(docker create --network none "$image" true)
mkdir "$staging/rootfs"
docker export "$container" | tar -x -C "$staging/rootfs" --numeric-owner --same-owner --same-permissions
docker image inspect --format '{{json .Config}}' "$image" > "$staging/config.json"
printf '%s\n' "$id" > "$staging/image-id"
chmod 755 "$staging" "$staging/rootfs"

# Swapped in whole: a reader sees the old folder or the new one, never half of one.
if [ -e "$dest" ]; then
  mv "$dest" "$staging.old"
fi
mv "$staging" "$dest"
rm -rf "$staging.old"
echo "$dest"
