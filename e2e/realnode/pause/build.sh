#!/usr/bin/env bash
# Builds the real node's sandbox ("pause") image without a registry: main.go compiled
# static, in a one-layer image written as a `docker save` archive that `ctr images import`
# (and `docker load`) read. Cached by the hash of main.go under
# $KFED_CACHE_DIR/bin/pause-<hash>/ (default ~/.cache/kfed). Prints the archive's path last.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_tag=pause
# shellcheck source=../../binaries/lib.sh
source "$here/../../binaries/lib.sh"

# The name the real node's containerd is configured with (e2e/realnode/containerd.py).
image=${PAUSE_IMAGE:-kfed.local/pause:1.0}
cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
hash=$(cat "$here/main.go" "$here/go.mod" | sha256sum | cut -c1-12)
out="$cache/bin/pause-$hash"
archive="$out/pause.tar"

if [ -f "$out/.done" ]; then
  say "cached in $out"
  echo "$archive"
  exit 0
fi
require_go "the pause image"
rm -rf "$out" && mkdir -p "$out/rootfs" "$out/image"
(cd "$here" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$out/rootfs/pause" .)

# One layer holding /pause, reproducible (fixed owner and time).
layer_tar="$out/layer.tar"
tar --create --file "$layer_tar" --directory "$out/rootfs" --owner=0 --group=0 --numeric-owner \
  --mtime=@0 --sort=name pause
diff_id=$(sha256sum "$layer_tar" | cut -d' ' -f1)
mkdir -p "$out/image/$diff_id"
mv "$layer_tar" "$out/image/$diff_id/layer.tar"
config='{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:'$diff_id'"]}}'
config_id=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
printf '%s' "$config" >"$out/image/$config_id.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' \
  "$config_id" "$image" "$diff_id" >"$out/image/manifest.json"
tar --create --file "$archive" --directory "$out/image" --owner=0 --group=0 --numeric-owner \
  --mtime=@0 --sort=name .
rm -rf "$out/rootfs" "$out/image"
touch "$out/.done"
say "built $image in $archive"
echo "$archive"
