#!/usr/bin/env bash
# Build, once, the real control-plane binaries the tests and the demo run:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler (from Go modules),
# kwok and helm. Output: $DMROLLOUT_CACHE/bin-<versions hash>/ (default ~/.cache/dmrollout).
# Re-running with the cache in place only checks that every binary exists.
#
#   hack/testenv.sh            build what is missing, print the bin directory
#   hack/testenv.sh --print    print the bin directory without building
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
key="$(sha256sum "$here/versions.env" | cut -c1-12)"
bin="$cache/bin-$key"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok helm)

if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  exit 0
fi

missing=()
for b in "${binaries[@]}"; do
  [[ -x "$bin/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
# One build at a time: a second caller waits here and then finds the binaries in place.
exec 9>"$cache/.build.lock"
flock 9
missing=()
for b in "${binaries[@]}"; do
  [[ -x "$bin/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "testenv.sh: the Go toolchain is required (go not on PATH)" >&2; exit 1; }
mkdir -p "$bin" "$cache/src"
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"
export CGO_ENABLED=0
log() { echo "testenv.sh: $*" >&2; }

build_kubernetes() {
  local mod="$cache/src/kubernetes-$KUBERNETES_VERSION"
  mkdir -p "$mod"
  # A wrapper module: k8s.io/kubernetes refers to its staging modules as v0.0.0 with
  # replace => ./staging/...; a consumer must pin each one to its published version.
  {
    echo "module dmrollout.local/kubebin"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    for s in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go \
      cloud-provider cluster-bootstrap code-generator component-base component-helpers \
      controller-manager cri-api cri-client cri-streaming csi-translation-lib \
      dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator \
      kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils \
      pod-security-admission sample-apiserver sample-cli-plugin sample-controller streaming; do
      echo "	k8s.io/$s => k8s.io/$s $KUBERNETES_STAGING_VERSION"
    done
    echo ")"
  } >"$mod/go.mod"
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
  (cd "$mod" && go mod tidy -e >/dev/null 2>&1 || true; cd "$mod" && go mod download k8s.io/kubernetes)
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$bin/$c" ]] && continue
    log "building $c $KUBERNETES_VERSION"
    (cd "$mod" && go build -tags tools -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)" -o "$bin/$c.tmp" "k8s.io/kubernetes/cmd/$c")
    mv "$bin/$c.tmp" "$bin/$c"
  done
}

build_etcd() {
  [[ -x "$bin/etcd" ]] && return
  local mod="$cache/src/etcd-$ETCD_VERSION"
  mkdir -p "$mod"
  # etcd's main package lives in the repository root module; the server module exports
  # etcdmain, so a three-line main gives the same binary without the root module.
  cat >"$mod/go.mod" <<GOMOD
module dmrollout.local/etcdbin

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat >"$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  log "building etcd $ETCD_VERSION"
  (cd "$mod" && go mod tidy && go build -ldflags "-s -w" -o "$bin/etcd.tmp" .)
  mv "$bin/etcd.tmp" "$bin/etcd"
}

build_tool() { # name module version
  local name="$1" pkg="$2" version="$3"
  [[ -x "$bin/$name" ]] && return
  log "building $name $version"
  GOBIN="$bin/.gobin-$name" go install -ldflags "-s -w" "$pkg@$version"
  mv "$bin/.gobin-$name/$name" "$bin/$name"
  rmdir "$bin/.gobin-$name"
}

start=$(date +%s)
build_etcd
build_tool kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
build_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
build_kubernetes
log "built ${missing[*]} in $(( $(date +%s) - start ))s"
echo "$bin"
