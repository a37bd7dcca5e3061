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

# go_tool <name> <version> <package>: build_once of `go install <package>@<version>` (from the Go
# module proxy) into $DMROLLOUT_CACHE/<name>-<version>/<name>; prints the path.
go_tool() {
  local name="$1" version="$2" package="$3"
  local cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
  local exe="$cache/$name-$version/$name"
  _go_install() {
    echo "$name: building $package@$version" >&2
    GOBIN="$(dirname "$exe")/.gobin" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
      go install -ldflags "-s -w" "$package@$version"
    mv "$(dirname "$exe")/.gobin/$(basename "$package")" "$exe"
    rmdir "$(dirname "$exe")/.gobin"
  }
  build_once "$exe" "$name-$version" _go_install
}
