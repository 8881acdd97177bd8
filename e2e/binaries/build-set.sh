#!/usr/bin/env bash
# Builds one set of versions.env, everything a bed of that set runs: the Kubernetes binaries,
# etcd and kwok (build.sh), the workers' operators (build-operators.sh) and upstream Kueue
# (build-kueue.sh: its controller; `make bench-scheduler-upstream` builds its harness itself).
#   build-set.sh pinned    the plain pins (K8S_VERSION, JOBSET_VERSION, ..., KUEUE_VERSION)
#   build-set.sh newest    the NEWEST_* pins, each in place of its plain one
# `make binaries` builds the bed's set (BED_VERSIONS) this way; `make binaries-pinned` and
# `make binaries-newest` build either. The three builds run in parallel; each script is
# idempotent (cached by version), so a built set costs nothing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
set_name=${1:?usage: build-set.sh pinned|newest}
case "$set_name" in
  # build-kueue.sh alone would take the bed's Kueue: name the pinned one.
  pinned) KUEUE_VERSION=$(sed -n 's/^KUEUE_VERSION=//p' "$here/versions.env"); export KUEUE_VERSION ;;
  newest)
    # Every NEWEST_X=v of versions.env becomes X=v for the scripts below (they read X from the
    # environment before versions.env): a pin added to both sets needs no change here.
    while IFS='=' read -r key value; do
      export "${key#NEWEST_}=$value"
    done < <(grep -E '^NEWEST_[A-Z_]+=' "$here/versions.env") ;;
  *) echo "build-set.sh: the set is pinned or newest, not $set_name" >&2; exit 2 ;;
esac

KFED_VERSIONS=$set_name bash "$here/build.sh" >/dev/null & kube=$!
bash "$here/build-operators.sh" >/dev/null & ops=$!
bash "$here/build-kueue.sh" kueue >/dev/null & kueue=$!
failed=0
wait $kube || failed=1
wait $ops || failed=1
wait $kueue || failed=1
[ $failed = 0 ] || { echo "build-set.sh $set_name: a build failed (see above)" >&2; exit 1; }
