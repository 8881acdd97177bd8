#!/usr/bin/env bash
# Write the kubeconfig the kfed MANAGER uses to reach a worker cluster, for a ServiceAccount
# of that worker (default kueue-system/kfed-manager-remote, whose RBAC is in
# deploy/worker/base/manager-remote-rbac.yaml), ready for:
#
#   kfed cluster add worker-1 --kubeconfig-file worker-1.kubeconfig
#
# The result passes kfed's kubeconfig validation: inline CA data and an inline bearer
# token; no file paths, no exec plugin, no insecure-skip-tls-verify.
#
# Run it with an admin kubeconfig of the WORKER. The token comes from the TokenRequest API
# with --duration (default one year; the apiserver may cap it: the expiry is printed), or,
# with --token-secret, from a long-lived kubernetes.io/service-account-token Secret (filled
# by kube-controller-manager's token controller; revoked by deleting the Secret). Renew a
# TokenRequest token before it expires: run this again and `kfed cluster add` the output.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: make-kubeconfig.sh [options]
  --kubeconfig FILE       admin kubeconfig of the worker (default: kubectl's: $KUBECONFIG, ~/.kube/config)
  --context NAME          context of that kubeconfig (default: its current context)
  --namespace NS          namespace of the ServiceAccount (default: kueue-system)
  --service-account NAME  the ServiceAccount (default: kfed-manager-remote); created if missing
  --name NAME             cluster and context name in the output (default: worker)
  --server URL            the worker's API server as the MANAGER reaches it
                          (default: the server of the admin kubeconfig)
  --ca-file FILE          PEM CA bundle of the worker's API server (default: the admin
                          kubeconfig's certificate-authority-data)
  --duration DURATION     lifetime of a TokenRequest token (default: 8760h)
  --token-secret          use a long-lived service-account-token Secret instead of a TokenRequest
  --secret-wait SECONDS   how long to wait for the token controller to fill it (default: 60)
  --output FILE           where to write the kubeconfig, mode 0600 (default: stdout)
environment: KUBECTL  the kubectl binary (default: kubectl)
EOF
}

die() {
  echo "make-kubeconfig.sh: $*" >&2
  exit 1
}

kubectl_bin=${KUBECTL:-kubectl}
admin_kubeconfig=""
admin_context=""
namespace=kueue-system
service_account=kfed-manager-remote
name=worker
server=""
ca_file=""
duration=8760h
token_secret=false
secret_wait=60
output=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --kubeconfig) admin_kubeconfig=${2:?--kubeconfig needs a value}; shift 2 ;;
    --context) admin_context=${2:?--context needs a value}; shift 2 ;;
    --namespace) namespace=${2:?--namespace needs a value}; shift 2 ;;
    --service-account) service_account=${2:?--service-account needs a value}; shift 2 ;;
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --server) server=${2:?--server needs a value}; shift 2 ;;
    --ca-file) ca_file=${2:?--ca-file needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --token-secret) token_secret=true; shift ;;
    --secret-wait) secret_wait=${2:?--secret-wait needs a value}; shift 2 ;;
    --output) output=${2:?--output needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[[ "$name" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "--name $name is not a DNS-1123 name"
[[ "$secret_wait" =~ ^[0-9]+$ ]] || die "--secret-wait $secret_wait is not a number of seconds"
[[ -z "$ca_file" || -r "$ca_file" ]] || die "--ca-file $ca_file cannot be read"
command -v "$kubectl_bin" >/dev/null || die "$kubectl_bin not found (set KUBECTL)"

k() {
  local flags=()
  [[ -n "$admin_kubeconfig" ]] && flags+=("--kubeconfig=$admin_kubeconfig")
  [[ -n "$admin_context" ]] && flags+=("--context=$admin_context")
  "$kubectl_bin" "${flags[@]}" "$@"
}

# Where the manager connects, and the CA it verifies the worker with.
if [[ -z "$server" ]]; then
  server=$(k config view --minify -o 'jsonpath={.clusters[0].cluster.server}')
fi
[[ "$server" == https://* ]] || die "server '$server' is not an https:// URL (pass --server)"
if [[ -n "$ca_file" ]]; then
  ca_data=$(base64 <"$ca_file" | tr -d '\n')
else
  ca_data=$(k config view --raw --minify --flatten \
    -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')
fi
[[ -n "$ca_data" ]] || die "the admin kubeconfig has no certificate-authority-data: pass --ca-file"

# The ServiceAccount (its RBAC comes from deploy/worker; a new one can do nothing yet).
k get namespace "$namespace" >/dev/null 2>&1 ||
  die "namespace $namespace does not exist: apply deploy/worker/overlays/default first"
if ! k -n "$namespace" get serviceaccount "$service_account" >/dev/null 2>&1; then
  k -n "$namespace" create serviceaccount "$service_account" >/dev/null
  echo "created ServiceAccount $namespace/$service_account (grant it RBAC: deploy/worker)" >&2
fi

if [[ "$token_secret" == true ]]; then
  secret="$service_account-token"
  if ! k -n "$namespace" get secret "$secret" >/dev/null 2>&1; then
    k -n "$namespace" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
type: kubernetes.io/service-account-token
metadata:
  name: $secret
  namespace: $namespace
  annotations:
    kubernetes.io/service-account.name: $service_account
EOF
    created_secret=true
  fi
  token=""
  for ((waited = 0; ; waited++)); do
    token=$(k -n "$namespace" get secret "$secret" -o 'jsonpath={.data.token}' | base64 -d)
    [[ -n "$token" || waited -ge secret_wait ]] && break
    sleep 1
  done
  if [[ -z "$token" ]]; then
    [[ "${created_secret:-false}" == true ]] && k -n "$namespace" delete secret "$secret" >/dev/null
    die "Secret $namespace/$secret got no token within ${secret_wait}s: is kube-controller-manager's token controller running? (or drop --token-secret)"
  fi
  echo "token: Secret $namespace/$secret (valid until the Secret is deleted)" >&2
else
  token=$(k -n "$namespace" create token "$service_account" --duration="$duration")
  [[ -n "$token" ]] || die "the apiserver issued no token"
  # The payload's exp claim: the apiserver may have shortened the requested duration.
  payload=$(cut -d. -f2 <<<"$token" | tr '_-' '/+')
  while ((${#payload} % 4)); do payload+="="; done
  expiry=$(base64 -d <<<"$payload" 2>/dev/null | sed -n 's/.*"exp":\([0-9]*\).*/\1/p')
  if [[ -n "$expiry" ]]; then
    echo "token: TokenRequest, expires $(date -u -d "@$expiry" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo "at $expiry")" >&2
  fi
fi

kubeconfig=$(
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: $name
    cluster:
      server: $server
      certificate-authority-data: $ca_data
users:
  - name: $name-$service_account
    user:
      token: $token
contexts:
  - name: $name
    context:
      cluster: $name
      user: $name-$service_account
current-context: $name
EOF
)

if [[ -n "$output" ]]; then
  (umask 077 && printf '%s\n' "$kubeconfig" >"$output")
  echo "wrote $output (context $name, ServiceAccount $namespace/$service_account, server $server)" >&2
else
  printf '%s\n' "$kubeconfig"
fi
