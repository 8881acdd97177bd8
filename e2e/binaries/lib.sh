# shellcheck shell=bash
# Shared by build.sh, build-operators.sh and build-kueue.sh (sourced): messages, the Go check and the error
# for a module the proxy does not serve. The sourcing script sets build_tag (its messages'
# prefix) first.

say() { printf '[%s %s] %s\n' "${build_tag:-build}" "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

require_go() {  # what_needs_it
  command -v go >/dev/null 2>&1 || die "Go is not installed or not on PATH. Install Go >= 1.24 (Debian: apt-get install golang-go, or the official toolchain) and run this again."
  local minor
  minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  [ "${minor:-0}" -ge 24 ] || die "Go $(go env GOVERSION) is too old: $1 needs Go >= 1.24."
}

fetch_failed() {
  die "could not download $1 from the Go module proxy ($(go env GOPROXY)). Check that the proxy is reachable (GOPROXY, network) and run this again."
}
