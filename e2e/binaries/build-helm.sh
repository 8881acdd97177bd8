#!/usr/bin/env bash
# Builds Helm (helm.sh/helm/v4, cmd/helm) from its Go module at the pinned HELM_VERSION into
# $KFED_CACHE_DIR/bin/helm-v<version>/helm (default ~/.cache/kfed): the chart's tests
# (tests/integration/deploy, tests/integration/realnode) run it.
#
# Helm's go.mod has no replace lines, so `go install module/cmd/helm@version` builds it with
# the module's own go.mod and go.sum: the dependency set Helm released. The version is
# stamped the way Helm's Makefile stamps a tagged build (`helm version` prints it).
# Idempotent: skipped when the .done stamp exists; two runs at once build once (flock).
# HELM_VERSION (no leading v) overrides the pin in versions.env. Prints the directory last.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pinned() { sed -n "s/^$1=//p" "$here/versions.env"; }
VERSION=${HELM_VERSION:-$(pinned HELM_VERSION)}
major=${VERSION%%.*}
module="helm.sh/helm/v$major"

cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
out="$cache/bin/helm-v$VERSION"

build_tag=build-helm
# shellcheck source=lib.sh
source "$here/lib.sh"
[ -n "$VERSION" ] || die "no HELM_VERSION in $here/versions.env"

mkdir -p "$cache/build"
exec 9>"$cache/build/.helm-v$VERSION.lock"
flock 9
if [ -f "$out/.done" ] && [ -x "$out/helm" ]; then
  say "helm v$VERSION: cached in $out"
  printf '%s\n' "$out"
  exit 0
fi

require_go "Helm v$VERSION"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

rm -rf "$out" && mkdir -p "$out"
log="$out/build.log" t0=$SECONDS
ldflags="-s -w -X $module/internal/version.version=v$VERSION"
ldflags="$ldflags -X $module/internal/version.metadata= -X $module/internal/version.gitTreeState=clean"
say "helm v$VERSION: downloading and compiling $module/cmd/helm (log: $log)"
if ! GOBIN="$out" go install -trimpath -ldflags "$ldflags" "$module/cmd/helm@v$VERSION" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  if grep -qE 'proxy|dial tcp|no matching versions|unknown revision' "$log"; then
    fetch_failed "$module@v$VERSION"
  fi
  die "helm v$VERSION: go install failed (full log: $log)"
fi
"$out/helm" version --short >>"$log" 2>&1 || die "helm v$VERSION: the built binary does not run (log: $log)"
touch "$out/.done"
say "helm v$VERSION: built in $((SECONDS - t0))s"
printf '%s\n' "$out"
