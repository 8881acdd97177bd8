#!/usr/bin/env bash
# Builds promtool (cmd/promtool of the github.com/prometheus/prometheus Go module) at the
# pinned PROMETHEUS_VERSION into $KFED_CACHE_DIR/bin/promtool-v<version>/ (default
# ~/.cache/kfed). The tests run `promtool check rules` and `promtool test rules` on the
# alerts of deploy/ (tests/unit/deploy/test_alert_rules.py).
#
# Prometheus tags its Go module v0.<major><minor, two digits>.<patch> for release
# v<major>.<minor>.<patch> (3.16.0 is v0.316.0); the module's VERSION file is checked against
# the pin. Built inside the downloaded module with its own go.mod and go.sum (-mod=readonly):
# the dependency set upstream released. Only cmd/promtool is compiled (no UI assets, no
# prometheus server).
#
# Idempotent: skipped when the .done stamp exists. PROMETHEUS_VERSION in the environment (no
# leading v) overrides the pin in versions.env. Prints the directory last.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pinned() { sed -n "s/^$1=//p" "$here/versions.env"; }
VERSION=${PROMETHEUS_VERSION:-$(pinned PROMETHEUS_VERSION)}
module=github.com/prometheus/prometheus

cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
out="$cache/bin/promtool-v$VERSION"

build_tag=build-promtool
# shellcheck source=lib.sh
source "$here/lib.sh"

if [ -f "$out/.done" ] && [ -x "$out/promtool" ]; then
  say "promtool v$VERSION: cached in $out"
  printf '%s\n' "$out"
  exit 0
fi

[[ $VERSION =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "PROMETHEUS_VERSION '$VERSION' is not X.Y.Z"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} patch=${BASH_REMATCH[3]}
module_version=$(printf 'v0.%d%02d.%d' "$major" "$minor" "$patch")

require_go "promtool v$VERSION"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=readonly"

mkdir -p "$cache/build"
# One build at a time (make binaries and a test run may both call this script).
exec 9>"$cache/build/.promtool-v$VERSION.lock"
flock 9
if [ -f "$out/.done" ] && [ -x "$out/promtool" ]; then
  say "promtool v$VERSION: cached in $out"
  printf '%s\n' "$out"
  exit 0
fi

t0=$SECONDS
say "promtool v$VERSION: downloading $module@$module_version"
json=$(go mod download -json "$module@$module_version" 2>&1) || fetch_failed "$module@$module_version"
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
{ [ -n "$dir" ] && [ -d "$dir" ]; } || fetch_failed "$module@$module_version"
released=$(cat "$dir/VERSION" 2>/dev/null || true)
[ "$released" = "$VERSION" ] || die "$module@$module_version says it is Prometheus '$released', not $VERSION"

rm -rf "$out" && mkdir -p "$out"
log="$out/build.log"
ldflags="-s -w -X github.com/prometheus/common/version.Version=$VERSION"
ldflags="$ldflags -X github.com/prometheus/common/version.Branch=release-$major.$minor"
say "promtool v$VERSION: compiling cmd/promtool (log: $log)"
if ! (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out/promtool" ./cmd/promtool) >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "promtool v$VERSION: go build failed (full log: $log)"
fi
"$out/promtool" --version >/dev/null || die "promtool v$VERSION: the built binary does not run"
touch "$out/.done"
say "promtool v$VERSION: built in $((SECONDS - t0))s"
printf '%s\n' "$out"
