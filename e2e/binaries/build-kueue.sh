#!/usr/bin/env bash
# Builds upstream Kueue from the sigs.k8s.io/kueue Go module at the pinned KUEUE_VERSION:
#   kueue                          cmd/kueue, the real controller manager: the interop tests run
#                                  it as a worker of kfed's manager and as a MultiKueue manager
#                                  of a kfed worker (target "kueue", what `make binaries` builds)
#   minimalkueue                   test/performance/scheduler/minimalkueue and
#   performance-scheduler-runner   test/performance/scheduler/runner: upstream's own
#                                  scheduler-performance harness, for `make bench-scheduler-upstream`
#                                  (target "harness")
# into $KFED_CACHE_DIR/bin/kueue-v<version>/ (default ~/.cache/kfed), beside a copy of the
# released module in src/: its CRDs (config/components/crd/bases) and webhook manifests are
# installed from there, and the harness runner is started from inside it, as upstream's
# Makefile does.
#
# Built with the module's own go.mod and go.sum (-mod=readonly): the dependency set upstream
# released. Usage: build-kueue.sh [kueue] [harness] (default: kueue). Idempotent: each target
# is skipped when its stamp exists. The version is the bed's set's (NEWEST_KUEUE_VERSION when
# BED_VERSIONS, or $KFED_BED_VERSIONS, is newest; else KUEUE_VERSION); KUEUE_VERSION in the
# environment (no leading v) overrides it. Prints the directory last.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pinned() { sed -n "s/^$1=//p" "$here/versions.env"; }
bed_set=${KFED_BED_VERSIONS:-$(pinned BED_VERSIONS)}
bed_pin=KUEUE_VERSION
[ "$bed_set" = newest ] && bed_pin=NEWEST_KUEUE_VERSION
VERSION=${KUEUE_VERSION:-$(pinned $bed_pin)}
module=sigs.k8s.io/kueue

cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
out="$cache/bin/kueue-v$VERSION"

build_tag=build-kueue
# shellcheck source=lib.sh
source "$here/lib.sh"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(kueue)
for target in "${targets[@]}"; do
  case $target in kueue | harness) ;; *) die "unknown target '$target' (kueue or harness)" ;; esac
done

missing=()
for target in "${targets[@]}"; do
  if [ -f "$out/.$target-done" ]; then
    say "kueue v$VERSION: $target cached in $out"
  else
    missing+=("$target")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  printf '%s\n' "$out"
  exit 0
fi

require_go "upstream Kueue"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=readonly"

if [ ! -f "$out/.src-done" ]; then
  say "kueue v$VERSION: downloading $module@v$VERSION"
  json=$(go mod download -json "$module@v$VERSION" 2>&1) || fetch_failed "$module@v$VERSION"
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  { [ -n "$dir" ] && [ -d "$dir" ]; } || fetch_failed "$module@v$VERSION"
  rm -rf "$out" && mkdir -p "$out"
  cp -R "$dir" "$out/src" && chmod -R u+w "$out/src"
  touch "$out/.src-done"
fi

ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=v$VERSION"
for target in "${missing[@]}"; do
  t0=$SECONDS log="$out/build-$target.log"
  case $target in
    kueue) packages=(./cmd/kueue) names=(kueue) ;;
    harness)
      packages=(./test/performance/scheduler/minimalkueue ./test/performance/scheduler/runner)
      names=(minimalkueue performance-scheduler-runner)
      ;;
  esac
  say "kueue v$VERSION: compiling ${names[*]} (the slow part; log: $log)"
  : >"$log"
  # One go build after the other: they share nearly all their packages, so the later ones
  # reuse the build cache.
  for i in "${!packages[@]}"; do
    if ! (cd "$out/src" && go build -trimpath -ldflags "$ldflags" -o "$out/${names[$i]}" "${packages[$i]}") >>"$log" 2>&1; then
      tail -n 30 "$log" >&2
      die "kueue v$VERSION: go build of ${packages[$i]} failed (full log: $log)"
    fi
  done
  touch "$out/.$target-done"
  say "kueue v$VERSION: $target built in $((SECONDS - t0))s"
done
printf '%s\n' "$out"
