#!/usr/bin/env bash
# Build the base image rlfleet's image starts from where no image registry can be reached: a minimal Debian
# bookworm root file system with Python 3.11 and venv, made by debootstrap from the mirror apt already uses,
# then `docker import`ed. The root file system is kept as a tarball in the cache directory, so a second build
# (or a fresh Docker data root) only re-imports it.
#
#   bash docker/base-image.sh [IMAGE]      (default rlfleet-base:bookworm; needs root, debootstrap, a daemon)
#
# Environment: RLFLEET_DOCKER_CACHE (default /var/cache/rlfleet-docker), DEBIAN_MIRROR (default: apt's).
set -euo pipefail
IMAGE="${1:-rlfleet-base:bookworm}"
CACHE="${RLFLEET_DOCKER_CACHE:-/var/cache/rlfleet-docker}"
TARBALL="$CACHE/base-bookworm.tar"
PACKAGES="python3.11,python3-venv"

apt_mirror() {
  # The first Debian (not security) URI of apt's own sources, deb822 or one-line format.
  local uri
  uri="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1)"
  [ -n "$uri" ] || uri="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    | awk '{print $2}' | grep -v security | head -n1)"
  echo "${uri:-http://deb.debian.org/debian}"
}

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE: present"
  exit 0
fi
mkdir -p "$CACHE"
if [ ! -s "$TARBALL" ]; then
  mirror="${DEBIAN_MIRROR:-$(apt_mirror)}"
  rootfs="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
  trap 'rm -rf --one-file-system "$rootfs"' EXIT  # never into a /proc or /sys a failed debootstrap left mounted
  echo "base image: debootstrap --variant=minbase bookworm from $mirror (with $PACKAGES)"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
  # Package lists and caches are no use in an image; the tarball is written whole, then renamed.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
fi
docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$TARBALL" "$IMAGE" >/dev/null
echo "base image $IMAGE: imported from $TARBALL"
