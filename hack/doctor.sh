#!/usr/bin/env bash
# Preflight: is every program the project runs on this machine? Reads hack/host-tools.txt.
#
#   hack/doctor.sh                  list every program and whether it is here; exit 1 if one is missing
#   hack/doctor.sh --install        install what is missing (hack/install-host-tools.sh), check again
#   hack/doctor.sh --need test      only the programs `make test` needs (also: image)
#
# Go and Python are the two things a machine must bring itself (README); everything else is here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
install=0
needs="test image"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --install) install=1 ;;
    --need) needs="$2"; shift ;;
    *) echo "doctor.sh: unknown argument $1 (use --install, --need test|image)" >&2; exit 2 ;;
  esac
  shift
done

missing_programs=()
check() {
  missing_programs=()
  while read -r program package need used_by; do
    [[ -z "$program" || "$program" == \#* ]] && continue
    [[ " $needs " == *" $need "* ]] || continue
    if command -v "$program" >/dev/null 2>&1; then
      printf '  ok       %-11s %s\n' "$program" "$used_by"
    else
      printf '  MISSING  %-11s %s  (Debian package %s)\n' "$program" "$used_by" "$package"
      missing_programs+=("$program")
    fi
  done <"$here/host-tools.txt"
}

for tool in go python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "doctor.sh: $tool is required and not on PATH (README: Go 1.26+, Python 3.11+)" >&2; exit 1; }
done
echo "doctor.sh: programs for: $needs"
check
if [[ ${#missing_programs[@]} -gt 0 && $install -eq 1 ]]; then
  for need in $needs; do
    bash "$here/install-host-tools.sh" "$need"
  done
  check
fi
if [[ ${#missing_programs[@]} -gt 0 ]]; then
  echo "doctor.sh: missing: ${missing_programs[*]}; run 'make doctor-install' (or hack/doctor.sh --install)" >&2
  exit 1
fi
echo "doctor.sh: every program is here"
