#!/usr/bin/env bash
# Builds the local test-bed binaries from Go modules and caches them outside the repo:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
#   kubelet (the real node, e2e/realnode)                             (k8s.io/kubernetes)
#   etcd                                                               (go.etcd.io/etcd/server/v3)
#   kwok                                                               (sigs.k8s.io/kwok)
# Idempotent: a binary set that is already built (its .done stamp exists) is skipped; a
# Kubernetes set built before a binary joined the list gets just the missing one.
# Cache root: $KFED_CACHE_DIR, default ~/.cache/kfed. Prints the bin directory last.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# KFED_VERSIONS=newest|pinned names the set of versions.env to build (NEWEST_* pins or the
# plain ones); default: the bed's ($KFED_BED_VERSIONS, else BED_VERSIONS).
KFED_VERSIONS=${KFED_VERSIONS:-${KFED_BED_VERSIONS:-$BED_VERSIONS}}
case "$KFED_VERSIONS" in
  pinned) ;;
  newest) K8S_VERSION=$NEWEST_K8S_VERSION ETCD_VERSION=$NEWEST_ETCD_VERSION KWOK_VERSION=$NEWEST_KWOK_VERSION ;;
  *) echo "build.sh: KFED_VERSIONS must be pinned or newest, not ${KFED_VERSIONS}" >&2; exit 2 ;;
esac

cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
k8s_dir="$cache/bin/k8s-v$K8S_VERSION"
etcd_dir="$cache/bin/etcd-v$ETCD_VERSION"
kwok_dir="$cache/bin/kwok-v$KWOK_VERSION"
work="$cache/build"

build_tag=build
# shellcheck source=lib.sh
source "$here/lib.sh"
require_go "Kubernetes v$K8S_VERSION"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

# Every binary of the Kubernetes set, one cache key (K8S_VERSION) for all of them.
k8s_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)

build_k8s() {
  # One build at a time per version (make binaries, `python -m e2e up` and a test run may
  # all call this script): the second waits, then finds the binaries cached.
  exec 9>"$work/.k8s-v$K8S_VERSION.lock"
  flock 9
  local missing=() b
  for b in "${k8s_binaries[@]}"; do [ -x "$k8s_dir/$b" ] || missing+=("$b"); done
  [ -f "$k8s_dir/.done" ] && [ ${#missing[@]} -eq 0 ] && { say "kubernetes v$K8S_VERSION: cached in $k8s_dir"; return; }
  [ -f "$k8s_dir/.done" ] || missing=("${k8s_binaries[@]}")
  local mod="$work/k8s-v$K8S_VERSION" t0=$SECONDS
  say "kubernetes v$K8S_VERSION: preparing module in $mod"
  rm -rf "$mod" && mkdir -p "$mod" "$k8s_dir"
  cd "$mod"
  go mod init kfed.local/k8sbin >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p') \
    || fetch_failed "k8s.io/kubernetes@v$K8S_VERSION"
  [ -n "$gomod" ] || fetch_failed "k8s.io/kubernetes@v$K8S_VERSION"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 with replace lines pointing at
  # ./staging; replace only applies in the main module, so we point each one at its published tag.
  local staging="v0.${K8S_VERSION#1.}" n=0
  for m in $(sed -n 's#^[[:space:]]*k8s.io/\([^ ]*\) => ./staging/src/k8s.io/.*#\1#p' "$gomod"); do
    go mod edit "-replace=k8s.io/$m=k8s.io/$m@$staging"; n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "found no staging modules in $gomod: unexpected k8s.io/kubernetes layout"
  say "kubernetes v$K8S_VERSION: $n staging modules replaced by $staging; resolving dependencies"
  go get "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null 2>&1 || fetch_failed "the dependencies of k8s.io/kubernetes@v$K8S_VERSION"
  local minor=${K8S_VERSION#1.}; minor=${minor%%.*}
  local ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  say "kubernetes v$K8S_VERSION: compiling ${missing[*]} (the slow part)"
  go build -trimpath -tags selinux,notest -ldflags "$ldf" -o "$k8s_dir/" \
    "${missing[@]/#/k8s.io/kubernetes/cmd/}"
  touch "$k8s_dir/.done"
  say "kubernetes v$K8S_VERSION: built in $((SECONDS - t0))s"
}

# Builds one main package of a module that cannot be `go install`ed (it has replace lines)
# from a throwaway module of ours that requires it.
build_tool() {  # name version module package out_dir
  local name=$1 version=$2 module=$3 pkg=$4 out=$5
  [ -f "$out/.done" ] && { say "$name $version: cached in $out"; return; }
  local mod="$work/$name-$version" t0=$SECONDS
  rm -rf "$mod" && mkdir -p "$mod" "$out"
  cd "$mod"
  go mod init "kfed.local/${name}bin" >/dev/null 2>&1
  say "$name $version: resolving $module@$version"
  go get "$module@$version" >/dev/null 2>&1 || fetch_failed "$module@$version"
  say "$name $version: compiling"
  go build -trimpath -ldflags "-s -w" -o "$out/$name" "$pkg"
  touch "$out/.done"
  say "$name $version: built in $((SECONDS - t0))s"
}

mkdir -p "$work"
build_tool etcd "v$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "$etcd_dir"
build_tool kwok "v$KWOK_VERSION" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok "$kwok_dir"
build_k8s
say "all binaries ready"
echo "$k8s_dir:$etcd_dir:$kwok_dir"
