#!/usr/bin/env bash
# Build the dmrollout image without a Docker engine (none runs here) into an OCI archive:
#
#   hack/image.sh                 # build/dmrollout-<version>.oci.tar, tagged localhost/dmrollout:<version>
#   IMAGE_BASE_REFRESH=1 hack/image.sh   # also re-make the Debian base
#
# 1. mmdebstrap makes a minimal Debian bookworm with Debian's python3.11 (cached in build/image/;
#    no docs, man pages or translations; a `python` link, which Debian's base lacks and the
#    Dockerfile calls), podman imports it as localhost/dmrollout-base:bookworm.
# 2. buildah builds the project's Dockerfile on that base (PYTHON_IMAGE), with chroot isolation
#    (podman/runc containers fail here: cgroups in hybrid mode). The host's CA bundle and a
#    pip.conf naming it are mounted into the RUN steps only, so pip trusts what the host trusts
#    and neither file ends up in a layer.
# 3. buildah pushes the result to an OCI archive (load it with `podman load -i`, or push it with
#    `skopeo copy oci-archive:... docker://...`).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
bash hack/install-image-tools.sh

version="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
work="build/image"
base_tar="$work/base-bookworm.tar"
base_ref="localhost/dmrollout-base:bookworm"
image_ref="${IMAGE_REF:-localhost/dmrollout:$version}"
archive="build/dmrollout-$version.oci.tar"
ca_bundle="${IMAGE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
mkdir -p "$work"

seconds() { date +%s.%N; }
t0="$(seconds)"
if [[ ! -f "$base_tar" || "${IMAGE_BASE_REFRESH:-}" == "1" ]]; then
  # merged-usr hook: mmdebstrap merges /usr itself, instead of installing usrmerge, which pulls
  # in the whole of perl (50 MB) for a one-time conversion.
  mmdebstrap --variant=minbase --include=python3.11,python3.11-venv,ca-certificates \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='ln -sf python3.11 "$1/usr/bin/python"; ln -sf python3.11 "$1/usr/bin/python3"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$work/base-bookworm.tmp.tar"  # the .tar suffix sets the format
  mv "$work/base-bookworm.tmp.tar" "$base_tar"
  podman rmi --force "$base_ref" >/dev/null 2>&1 || true
fi
if ! podman image exists "$base_ref"; then
  podman import "$base_tar" "$base_ref" >/dev/null
fi
t1="$(seconds)"

printf '[global]\ncert = %s\n' "$ca_bundle" > "$work/pip.conf"
# The image this tag named before: dropped once the tag moves, so rebuilds leave no dangling copy.
previous="$(podman image inspect --format '{{.Id}}' "$image_ref" 2>/dev/null || true)"
buildah bud --isolation chroot --layers=false \
  --build-arg "PYTHON_IMAGE=$base_ref" \
  -v "$ca_bundle:$ca_bundle:ro" -v "$repo/$work/pip.conf:/etc/pip.conf:ro" \
  -t "$image_ref" .
t2="$(seconds)"
current="$(podman image inspect --format '{{.Id}}' "$image_ref")"
if [[ -n "$previous" && "$previous" != "$current" ]]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi

rm -f "$archive"
buildah push --quiet "$image_ref" "oci-archive:$archive:$image_ref"
size_mb="$(podman image inspect --format '{{.Size}}' "$image_ref" | awk '{printf "%.0f", $1 / 1e6}')"
archive_mb="$(stat -c %s "$archive" | awk '{printf "%.0f", $1 / 1e6}')"
awk -v b="$t1" -v a="$t0" -v c="$t2" -v s="$size_mb" -v z="$archive_mb" -v r="$image_ref" -v f="$archive" \
  'BEGIN { printf "image %s: %s MB (archive %s, %s MB); base %.0f s, build %.0f s\n", r, s, f, z, b - a, c - b }'
