# Sourced by the scripts that build one tool into the cache (hack/kstatus.sh, hack/helm4.sh):
#   build_once <executable> <lock name> <command that builds it...>
# prints the executable's path; builds it first, under a lock (parallel test workers call the
# scripts at once), unless it is there already or the script was given --print.
build_once() {
  local exe="$1" lock="$2"
  shift 2
  if [[ "${BUILD_ONCE_PRINT:-}" == "--print" || -x "$exe" ]]; then
    echo "$exe"
    return 0
  fi
  command -v go >/dev/null || { echo "$lock: the Go toolchain is required (go not on PATH)" >&2; return 1; }
  local cache
  cache="$(dirname "$(dirname "$exe")")"
  mkdir -p "$(dirname "$exe")"
  exec 9>"$cache/.$lock.lock"
  flock 9
  [[ -x "$exe" ]] || "$@"
  echo "$exe"
}
