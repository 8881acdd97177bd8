#!/usr/bin/env bash
# Builds upstream Kueue's own scheduler-performance harness from the sigs.k8s.io/kueue Go
# module, for `make bench-scheduler-upstream` (only the benchmark needs it; the tests do not):
#   minimalkueue                   test/performance/scheduler/minimalkueue (the core controllers
#                                  and the scheduler, upstream's counterpart of kfed's
#                                  single-cluster controllers)
#   performance-scheduler-runner   test/performance/scheduler/runner (generator, "execution",
#                                  recorder; starts an envtest control plane and minimalkueue)
# into $KFED_CACHE_DIR/bin/kueue-harness-v<version>/ (default ~/.cache/kfed), beside a copy of
# the released module in src/: the runner is started from inside it, as upstream's Makefile
# does, and reads the module's CRDs (config/components/crd/bases) and the scenario's configs
# (test/performance/scheduler/configs) from there.
#
# Built with the module's own go.mod and go.sum (-mod=readonly): the dependency set upstream
# released. Idempotent: skipped when the .done stamp exists. KUEUE_HARNESS_VERSION (no leading
# v) overrides the pin in versions.env. Prints the bin directory last.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pinned() { sed -n "s/^$1=//p" "$here/versions.env"; }
VERSION=${KUEUE_HARNESS_VERSION:-$(pinned KUEUE_HARNESS_VERSION)}
module=sigs.k8s.io/kueue

cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
out="$cache/bin/kueue-harness-v$VERSION"

build_tag=build-kueue-harness
# shellcheck source=lib.sh
source "$here/lib.sh"

if [ -f "$out/.done" ]; then
  say "kueue harness v$VERSION: cached in $out"
  printf '%s\n' "$out"
  exit 0
fi
require_go "upstream Kueue's harness"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=readonly"

t0=$SECONDS
say "kueue harness v$VERSION: downloading $module@v$VERSION"
json=$(go mod download -json "$module@v$VERSION" 2>&1) || fetch_failed "$module@v$VERSION"
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
{ [ -n "$dir" ] && [ -d "$dir" ]; } || fetch_failed "$module@v$VERSION"

rm -rf "$out" && mkdir -p "$out"
cp -R "$dir" "$out/src" && chmod -R u+w "$out/src"
log="$out/build.log"
say "kueue harness v$VERSION: compiling minimalkueue and the runner (log: $log)"
# The two share nearly all their packages: one go build after the other reuses the cache.
if ! (cd "$out/src" &&
  go build -trimpath -ldflags "-s -w" -o "$out/minimalkueue" ./test/performance/scheduler/minimalkueue &&
  go build -trimpath -ldflags "-s -w" -o "$out/performance-scheduler-runner" ./test/performance/scheduler/runner) \
  >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "kueue harness v$VERSION: go build failed (full log: $log)"
fi
touch "$out/.done"
say "kueue harness v$VERSION: built in $((SECONDS - t0))s"
printf '%s\n' "$out"
