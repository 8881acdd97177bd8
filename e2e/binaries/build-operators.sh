#!/usr/bin/env bash
# Builds the batch operators that kfed's worker clusters run, from Go modules, and caches them
# outside the repo, each keyed by version:
#   jobset                      sigs.k8s.io/jobset                            (module root main.go)
#   trainer-controller-manager  github.com/kubeflow/trainer/v2                (cmd/trainer-controller-manager)
#   ray-operator                github.com/ray-project/kuberay/ray-operator   (module root main.go)
#   training-operator           github.com/kubeflow/training-operator         (cmd/training-operator.v1)
#   mpi-operator                github.com/kubeflow/mpi-operator              (cmd/mpi-operator)
#   lws                         sigs.k8s.io/lws                               (cmd)
#   appwrapper                  github.com/project-codeflare/appwrapper       (cmd)
#   karpenter                   sigs.k8s.io/karpenter                         (kwok: its kwok cloud provider)
# into $KFED_CACHE_DIR/bin/<name>-v<version>/ (default ~/.cache/kfed), with the module's CRD
# YAMLs copied beside the binary in crds/ (for the trainer, also its stock ClusterTrainingRuntimes
# in runtimes/; for jobset, the trainer and lws, also the module's webhook manifests.yaml in
# webhook/).
# All three pin k8s.io/* v0.34.1 and controller-runtime v0.22, the same minor as the test bed's
# Kubernetes; trainer v2.1.0 itself requires sigs.k8s.io/jobset v0.10.1, so the JobSet pin
# follows it. The Kubeflow v1 training-operator (PyTorchJob, TFJob, XGBoostJob, PaddleJob and
# JAXJob, kubeflow.org/v1) and the MPI
# operator v2 (MPIJob, kubeflow.org/v2beta1) pin k8s.io/* v0.31 and controller-runtime v0.19.
# Both ship an mpijobs.kubeflow.org CRD (v1 and v2beta1): only the MPI operator's is kept (the
# training-operator then runs without its MPIJob scheme: --enable-scheme).
#
# Each one is built inside a copy of its released module, with that module's own go.mod and
# go.sum (-mod=readonly): the exact dependency set upstream released. `go install module@version`
# is not used because it asks the proxy for the module's version list (to print deprecations)
# and the proxy answers 403 for sigs.k8s.io/jobset's list, although it serves v0.10.1 itself.
#
# Idempotent: an operator whose .done stamp exists is skipped. The builds run in parallel
# (KFED_BUILD_SERIAL=1 runs them one after another); each build's output goes to
# $KFED_CACHE_DIR/build/<name>-v<version>.log and is shown if it fails.
# Versions are pinned in versions.env; JOBSET_VERSION, TRAINER_VERSION, KUBERAY_VERSION in the
# environment override them (no leading v).
# TRAINING_OPERATOR_VERSION, MPI_OPERATOR_VERSION, LWS_VERSION, APPWRAPPER_VERSION and
# KARPENTER_VERSION likewise. Positional arguments build only the operators named (jobset
# trainer kuberay training-operator mpi-operator lws appwrapper karpenter), e.g.
# `build-operators.sh training-operator mpi-operator`; none: all eight. The AppWrapper operator
# v1.1.2 pins k8s.io/* v0.32 and controller-runtime v0.20; Karpenter v1.13.0 k8s.io/* v0.35
# (go 1.26.4: v1.14.0 and later need a newer Go than this machine's 1.26.8).
# Prints the bin directories built last, ':'-separated (jobset:trainer:kuberay:... by default).
#
# Running them against a bare control plane (etcd + kube-apiserver; checked with the test bed's
# v1.34.4, admin kubeconfig, leader election off, every port on 127.0.0.1):
#   CRDs: `kubectl apply --server-side -f <dir>/crds` (or create): they are 0.3-1.3 MB and a
#     client-side apply fails on the 256 KiB last-applied annotation. Apply them, and JobSet's
#     before the trainer starts (it watches JobSets from startup).
#   ray-operator --kubeconfig K --enable-leader-election=false --metrics-addr 127.0.0.1:P1
#     --health-probe-bind-address 127.0.0.1:P2
#     Needs nothing else: webhooks are off unless ENABLE_WEBHOOKS=true; metrics are plain HTTP.
#   jobset --kubeconfig K --config F, F being a config.jobset.x-k8s.io/v1alpha1 Configuration:
#     leaderElection.leaderElect false, internalCertManagement.enable false (else it wants a
#     jobset-system Secret and writes to the fixed /tmp/k8s-webhook-server/serving-certs),
#     webhook {port, host: 127.0.0.1, certDir: D}, metrics {bindAddress, certDir: D},
#     health.healthProbeBindAddress; D holds tls.crt/tls.key (SAN IP 127.0.0.1) of our own CA.
#     Its webhooks must be registered: the controller panics on a JobSet that skipped the
#     defaulting webhook (nil spec.network). Use config/components/webhook/manifests.yaml of
#     the module with clientConfig.url https://127.0.0.1:PORT/<path> and caBundle of that CA
#     instead of the service, and the two pod webhooks limited by objectSelector
#     `jobset.sigs.k8s.io/jobset-name Exists` (as its webhook/patches do). They fail closed:
#     while jobset is down, JobSets and JobSet pods cannot be created.
#   trainer-controller-manager --kubeconfig K --config F, F a config.trainer.kubeflow.org/
#     v1alpha1 Configuration: leaderElection.leaderElect false, certManagement.enable false,
#     webhook {port, host: 127.0.0.1} (host must be set: without a config file, or without
#     webhook.host, v2.1.0 dies of a nil pointer), metrics {bindAddress, secureServing: false},
#     health.healthProbeBindAddress. Its webhook certificate is read from
#     $TMPDIR/k8s-webhook-server/serving-certs/tls.{crt,key}: give each instance its own
#     TMPDIR. Its webhooks are validating only (manifests/base/webhook/manifests.yaml, same
#     url/caBundle rewrite); TrainJob -> JobSet needs the JobSet controller running too.
#   training-operator --kubeconfig K --enable-scheme=pytorchjob (and tfjob, xgboostjob,
#     paddlejob, jaxjob: v1.9.2 has those and mpijob; none given, all) --leader-elect=false
#     --metrics-bind-address 127.0.0.1:P1 --health-probe-bind-address 127.0.0.1:P2
#     --webhook-server-port P3: its webhook server (all interfaces) reads its certificate from
#     $TMPDIR/k8s-webhook-server/serving-certs (one TMPDIR per instance, as the trainer), and
#     /readyz answers once it serves. Its cert rotator (not optional in v1.9.2) wants a Secret
#     training-operator-webhook-cert (it fills it) in namespace $MY_POD_NAMESPACE (default
#     kubeflow) and a file /tmp/k8s-webhook-server/serving-certs/tls.crt (existence only: in a
#     pod, the Secret's volume) before any controller starts; with no
#     ValidatingWebhookConfiguration named validator.training-operator.kubeflow.org it injects
#     nothing and goes on. Its webhooks only validate: the bed registers none, and its
#     controller defaults each job itself.
#   mpi-operator --kubeConfig K --lock-namespace NS: leader election is always on (a Lease in
#     NS, which must exist); its health server listens on the constant :8080, so this script
#     patches that one expression in its copy of the module to read KFED_HEALTH_ADDR first
#     (unset: :8080 as released), else two instances on one host cannot both run. No webhooks.
#   appwrapper --kubeconfig K --config CM, env NAMESPACE=NS: it has no flags for its settings;
#     it reads them (config.yaml, the only key) from ConfigMap CM of namespace NS, and creates
#     CM with its defaults when missing (webhooks on), so write CM first: webhooksEnabled
#     false (else its cert rotator wants a Secret and the ValidatingWebhookConfiguration and
#     Service it names, and its webhook server listens on the constant :9443 of every
#     interface), controllerManager {leaderElection false, health.bindAddress
#     127.0.0.1:P, metrics.bindAddress "0" (off; else HTTPS with authn/authz)},
#     appwrapper.autopilot {injectAntiAffinities false, monitorNodes false} (else it watches
#     Nodes and adds GPU-health anti-affinities to every GPU pod). Probe its /healthz only: a
#     GET of /readyz starts its webhook server on :9443 even with webhooks off (two
#     instances on one host: the second exits). Without its webhook nothing labels an
#     AppWrapper with its user nor defaults its queue (its defaultQueueName is the webhook's);
#     its controller runs any AppWrapper whose spec.managedBy is unset or its own once
#     spec.suspend is false, creating each component as its template says (a Job without a
#     queue label), and deletes them again when suspended.
#   karpenter (not an operator of every worker: the autoscaler of a bed cluster whose node
#     groups grow, e2e/local/autoscaler.py): no flags needed, its settings are environment
#     variables: KUBECONFIG, DISABLE_LEADER_ELECTION=true, METRICS_PORT, HEALTH_PROBE_PORT (both
#     on every interface), INSTANCE_TYPES_FILE_PATH (the kwok provider's instance types, a JSON
#     list of {name, offerings, architecture, operatingSystems, resources}; nvidia.com/gpu
#     counts like cpu), BATCH_IDLE_DURATION/BATCH_MAX_DURATION (how long it gathers pending
#     pods). Apply crds/ first (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass), then a
#     KWOKNodeClass and NodePools naming it. Its nodes carry kwok.x-k8s.io/node=fake, so the
#     bed's kwok runs them. No webhooks. Checked with v1.13.0 on Kubernetes 1.37.2: a pod asking
#     for 4 GPUs ran on a new node ~1 s after creation; the empty node went ~27 s after the pod
#     did (consolidateAfter 5s).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The pins live in versions.env; the environment may override them.
pinned() { sed -n "s/^$1=//p" "$here/versions.env"; }
JOBSET_VERSION=${JOBSET_VERSION:-$(pinned JOBSET_VERSION)}
TRAINER_VERSION=${TRAINER_VERSION:-$(pinned TRAINER_VERSION)}
KUBERAY_VERSION=${KUBERAY_VERSION:-$(pinned KUBERAY_VERSION)}
TRAINING_OPERATOR_VERSION=${TRAINING_OPERATOR_VERSION:-$(pinned TRAINING_OPERATOR_VERSION)}
MPI_OPERATOR_VERSION=${MPI_OPERATOR_VERSION:-$(pinned MPI_OPERATOR_VERSION)}
LWS_VERSION=${LWS_VERSION:-$(pinned LWS_VERSION)}
APPWRAPPER_VERSION=${APPWRAPPER_VERSION:-$(pinned APPWRAPPER_VERSION)}
KARPENTER_VERSION=${KARPENTER_VERSION:-$(pinned KARPENTER_VERSION)}

cache=${KFED_CACHE_DIR:-$HOME/.cache/kfed}
jobset_dir="$cache/bin/jobset-v$JOBSET_VERSION"
trainer_dir="$cache/bin/trainer-v$TRAINER_VERSION"
kuberay_dir="$cache/bin/kuberay-v$KUBERAY_VERSION"
training_operator_dir="$cache/bin/training-operator-v$TRAINING_OPERATOR_VERSION"
mpi_operator_dir="$cache/bin/mpi-operator-v$MPI_OPERATOR_VERSION"
lws_dir="$cache/bin/lws-v$LWS_VERSION"
appwrapper_dir="$cache/bin/appwrapper-v$APPWRAPPER_VERSION"
karpenter_dir="$cache/bin/karpenter-v$KARPENTER_VERSION"
work="$cache/build"

build_tag=build-operators
# shellcheck source=lib.sh
source "$here/lib.sh"
require_go "these operators"
# -mod=readonly: build with the released go.mod/go.sum as they are (it comes last in GOFLAGS, so
# it wins over a -mod from the caller's GOFLAGS; a caller's -p=1 still applies); GOWORK=off: no
# go.work found above the cache can pull in other modules.
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=readonly"

# Downloads module@version into the module cache and prints its directory there.
module_dir() {  # module version
  local json dir
  json=$(go mod download -json "$1@$2" 2>&1) || fetch_failed "$1@$2"
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then fetch_failed "$1@$2"; fi
  printf '%s\n' "$dir"
}

# Copies the *.yaml of one folder of a module (not kustomization.yaml) into dest; from may also
# be one YAML file (a folder that holds other manifests beside its CRD).
copy_yamls() {  # from_dir|from_file dest_dir
  mkdir -p "$2"
  if [ -f "$1" ]; then cp "$1" "$2/" && chmod u+w "$2"/*.yaml; return 0; fi
  local f n=0
  for f in "$1"/*.yaml; do
    [ -f "$f" ] || continue
    [ "$(basename "$f")" = kustomization.yaml ] && continue
    cp "$f" "$2/" && n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "found no YAML in $1: unexpected module layout"
  chmod u+w "$2"/*.yaml
}

# Builds one operator: copy of the released module, go build of its main package, CRDs beside.
# patch_fn, when given, runs in the module's copy before the build (mpi-operator's health port).
build_operator() {  # name version module main_pkg binary out_dir crd_dir [extra ldflags] [patch_fn]
  local name=$1 version=$2 module=$3 pkg=$4 bin=$5 out=$6 crds=$7 ldx=${8:-} patch=${9:-}
  [ -f "$out/.done" ] && { say "$name v$version: cached in $out"; return 0; }
  local src="$work/$name-v$version" t0=$SECONDS dir
  say "$name v$version: downloading $module@v$version"
  dir=$(module_dir "$module" "v$version")
  rm -rf "$src" "$out" && mkdir -p "$out"
  cp -R "$dir" "$src" && chmod -R u+w "$src"
  if [ -n "$patch" ]; then (cd "$src" && "$patch") || die "$name v$version: $patch failed"; fi
  say "$name v$version: compiling $pkg (log: $src.log)"
  if ! (cd "$src" && go build -trimpath -ldflags "-s -w $ldx" -o "$out/$bin" "$pkg") >"$src.log" 2>&1; then
    tail -n 30 "$src.log" >&2
    die "$name v$version: go build failed (full log: $src.log)"
  fi
  copy_yamls "$dir/$crds" "$out/crds"
  rm -rf "$src" "$src.log"
  touch "$out/.done"
  say "$name v$version: built in $((SECONDS - t0))s ($(du -h "$out/$bin" | cut -f1))"
}

# Copies the module's webhook manifests.yaml (the Mutating/ValidatingWebhookConfigurations the
# test bed registers by URL) to out/webhook/; also into a cache built before this step existed.
copy_webhooks() {  # module version from_dir out_dir
  [ -f "$4/webhook/manifests.yaml" ] && return 0
  local from
  from="$(module_dir "$1" "v$2")/$3/manifests.yaml"
  [ -f "$from" ] || die "found no $3/manifests.yaml in $1@v$2: unexpected module layout"
  mkdir -p "$4/webhook" && cp "$from" "$4/webhook/" && chmod u+w "$4/webhook/manifests.yaml"
}

build_jobset() {
  build_operator jobset "$JOBSET_VERSION" sigs.k8s.io/jobset . jobset "$jobset_dir" \
    config/components/crd/bases "-X sigs.k8s.io/jobset/pkg/version.GitVersion=v$JOBSET_VERSION"
  copy_webhooks sigs.k8s.io/jobset "$JOBSET_VERSION" config/components/webhook "$jobset_dir"
}
build_trainer() {
  build_operator trainer "$TRAINER_VERSION" github.com/kubeflow/trainer/v2 \
    ./cmd/trainer-controller-manager trainer-controller-manager "$trainer_dir" manifests/base/crds
  copy_webhooks github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" manifests/base/webhook "$trainer_dir"
  # The stock ClusterTrainingRuntimes (torch-distributed, deepspeed-distributed, ...): a TrainJob
  # names one in spec.runtimeRef. Copied when missing, like the webhook manifests.
  if [ ! -d "$trainer_dir/runtimes" ]; then
    # Assigned first: a failed download inside an argument would not stop the script.
    local dir
    dir=$(module_dir github.com/kubeflow/trainer/v2 "v$TRAINER_VERSION")
    copy_yamls "$dir/manifests/base/runtimes" "$trainer_dir/runtimes"
  fi
}
build_kuberay() {
  build_operator kuberay "$KUBERAY_VERSION" github.com/ray-project/kuberay/ray-operator . \
    ray-operator "$kuberay_dir" config/crd/bases
}
build_training_operator() {
  build_operator training-operator "$TRAINING_OPERATOR_VERSION" \
    github.com/kubeflow/training-operator ./cmd/training-operator.v1 training-operator \
    "$training_operator_dir" manifests/base/crds
  # Its kubeflow.org/v1 MPIJob CRD would take mpijobs.kubeflow.org from the MPI operator's v2beta1.
  rm -f "$training_operator_dir/crds/kubeflow.org_mpijobs.yaml"
}
# The health server's address: the released constant :8080, unless KFED_HEALTH_ADDR says another
# (the test bed runs one instance per worker on one host). Fails if the line is not as released.
patch_mpi_health_addr() {
  local f=cmd/mpi-operator/app/server.go
  local from='Addr:    fmt.Sprintf(":%d", healthCheckPort),'
  grep -qF "$from" "$f" || { echo "no '$from' in $f" >&2; return 1; }
  sed -i 's|Addr:    fmt.Sprintf(":%d", healthCheckPort),|Addr: func() string { if a := os.Getenv("KFED_HEALTH_ADDR"); a != "" { return a }; return fmt.Sprintf(":%d", healthCheckPort) }(),|' "$f"
  grep -qF 'KFED_HEALTH_ADDR' "$f"
}
build_mpi_operator() {
  build_operator mpi-operator "$MPI_OPERATOR_VERSION" github.com/kubeflow/mpi-operator \
    ./cmd/mpi-operator mpi-operator "$mpi_operator_dir" manifests/base/kubeflow.org_mpijobs.yaml \
    "-X github.com/kubeflow/mpi-operator/pkg/version.Version=v$MPI_OPERATOR_VERSION" \
    patch_mpi_health_addr
}
build_lws() {
  build_operator lws "$LWS_VERSION" sigs.k8s.io/lws ./cmd lws "$lws_dir" config/crd/bases \
    "-X sigs.k8s.io/lws/pkg/version.GitVersion=v$LWS_VERSION"
  copy_webhooks sigs.k8s.io/lws "$LWS_VERSION" config/webhook "$lws_dir"
}
build_appwrapper() {
  build_operator appwrapper "$APPWRAPPER_VERSION" github.com/project-codeflare/appwrapper ./cmd \
    appwrapper "$appwrapper_dir" config/crd/bases "-X main.BuildVersion=v$APPWRAPPER_VERSION"
}

# Karpenter's kwok cloud provider (./kwok of the module); its CRDs are the chart's (NodePool,
# NodeClaim, NodeOverlay) and the kwok node class's (KWOKNodeClass).
build_karpenter() {
  build_operator karpenter "$KARPENTER_VERSION" sigs.k8s.io/karpenter ./kwok karpenter \
    "$karpenter_dir" kwok/charts/crds
  if [ ! -f "$karpenter_dir/crds/karpenter.kwok.sh_kwoknodeclasses.yaml" ]; then
    local dir
    dir=$(module_dir sigs.k8s.io/karpenter "v$KARPENTER_VERSION")
    copy_yamls "$dir/kwok/apis/crds" "$karpenter_dir/crds"
  fi
}

all_operators=(jobset trainer kuberay training-operator mpi-operator lws appwrapper karpenter)
wanted=("$@")
[ "${#wanted[@]}" -gt 0 ] || wanted=("${all_operators[@]}")
dirs=()
for op in "${wanted[@]}"; do
  case "$op" in
    jobset) dirs+=("$jobset_dir") ;;
    trainer) dirs+=("$trainer_dir") ;;
    kuberay) dirs+=("$kuberay_dir") ;;
    training-operator) dirs+=("$training_operator_dir") ;;
    mpi-operator) dirs+=("$mpi_operator_dir") ;;
    lws) dirs+=("$lws_dir") ;;
    appwrapper) dirs+=("$appwrapper_dir") ;;
    karpenter) dirs+=("$karpenter_dir") ;;
    *) die "unknown operator '$op'; known: ${all_operators[*]}" ;;
  esac
done

mkdir -p "$work"
if [ "${KFED_BUILD_SERIAL:-0}" = 1 ]; then
  for op in "${wanted[@]}"; do "build_${op//-/_}"; done
else
  # Each build in its own subshell (its own die); the module cache is safe to share, Go locks it.
  pids=() failed=0
  for op in "${wanted[@]}"; do "build_${op//-/_}" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [ "$failed" = 0 ] || die "at least one operator failed to build (see above)"
fi
say "all operators ready"
(IFS=:; echo "${dirs[*]}")
