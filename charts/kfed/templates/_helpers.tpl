{{/* Labels of every object: deploy/'s (kustomize's app.kubernetes.io/part-of) and Helm's
release. tests/integration/deploy/test_chart.py ignores only helm.sh/chart and
app.kubernetes.io/instance when it compares with deploy/. */}}
{{- define "kfed.labels" -}}
app.kubernetes.io/part-of: kfed
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The release's full name, which every object's name starts with in place of "kfed"
(kfed-manager, kfed-worker-shim, kfed-batch-admin-role, ...): fullnameOverride if set, else
the release name when it already holds the chart's name (nameOverride, by default "kfed"),
else both joined. The documented release, kfed, keeps kfed's names. At most 50 characters,
so that the longest name a DNS label must hold (<fullname>-worker-shim) fits in 63. */}}
{{- define "kfed.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 50 | trimSuffix "-" }}
{{- end }}

{{- define "kfed.fullname" -}}
{{- $full := .Values.fullnameOverride }}
{{- if not $full }}
{{- $name := include "kfed.name" . }}
{{- $full = ternary .Release.Name (printf "%s-%s" .Release.Name $name) (contains $name .Release.Name) }}
{{- end }}
{{- $full | trunc 50 | trimSuffix "-" }}
{{- end }}

{{/* Who holds APIService .name other than this release, in words; empty when there is none
of that name or this release owns it (Helm's meta.helm.sh/release-* annotations). Upstream
Kueue's manifests and chart create the same two visibility APIServices as kfed's manager
side. */}}
{{- define "kfed.apiServiceOwner" -}}
{{- $found := lookup "apiregistration.k8s.io/v1" "APIService" "" .name }}
{{- if $found }}
{{- $annotations := $found.metadata.annotations | default dict }}
{{- $release := index $annotations "meta.helm.sh/release-name" | default "" }}
{{- $namespace := index $annotations "meta.helm.sh/release-namespace" | default "" }}
{{- if not (and (eq $release .root.Release.Name) (eq $namespace .root.Release.Namespace)) }}
{{- if $release }}Helm release {{ $release }} in namespace {{ $namespace }}
{{- else }}no Helm release (applied with kubectl or another tool){{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Whether the chart renders visibility APIService .name (manager.visibility.apiServices):
auto, the default, renders it unless another owner's exists (upstream Kueue's release,
typically), which is left as it is; true renders it always (Helm refuses to take another
release's object unless --take-ownership); false never. Outside a cluster (helm template)
lookup finds nothing: rendered. Unset (a release upgraded with --reuse-values from a chart
without the value): auto. */}}
{{- define "kfed.apiServicesMode" -}}
{{- dig "apiServices" "auto" .Values.manager.visibility | toString }}
{{- end }}

{{- define "kfed.rendersAPIService" -}}
{{- $mode := include "kfed.apiServicesMode" .root }}
{{- if eq $mode "true" }}true
{{- else if and (eq $mode "auto") (not (include "kfed.apiServiceOwner" .)) }}true
{{- end }}
{{- end }}

{{- define "kfed.image" -}}
{{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}
{{- end }}

{{/* Fails the render on a value kfed cannot run with, saying which and what it may be. */}}
{{- define "kfed.checkValues" -}}
{{- if not (has .Values.side (list "manager" "worker")) }}
{{- fail (printf "side: %q is neither manager nor worker" .Values.side) }}
{{- end }}
{{- if not (has .Values.webhook.certificates (list "kfed" "cert-manager")) }}
{{- fail (printf "webhook.certificates: %q is neither kfed nor cert-manager" .Values.webhook.certificates) }}
{{- end }}
{{- if and .Values.webhook.registerHost (eq .Values.webhook.certificates "cert-manager") }}
{{- fail "webhook.registerHost: only with webhook.certificates=kfed (with cert-manager the chart registers the webhook by Service)" }}
{{- end }}
{{- if not (has .Values.observability.metricsCertificates (list "kfed" "cert-manager")) }}
{{- fail (printf "observability.metricsCertificates: %q is neither kfed nor cert-manager" .Values.observability.metricsCertificates) }}
{{- end }}
{{- if and (eq .Values.observability.metricsCertificates "cert-manager") (not .Values.observability.secureMetrics) }}
{{- fail "observability.metricsCertificates=cert-manager: the certificate is for the secure metrics endpoint; set observability.secureMetrics=true too" }}
{{- end }}
{{- if not (has (include "kfed.apiServicesMode" .) (list "auto" "true" "false")) }}
{{- fail (printf "manager.visibility.apiServices: %q is not auto, true or false" (include "kfed.apiServicesMode" .)) }}
{{- end }}
{{- if not (has .Values.worker.mode (list "admit" "fence-only" "no-fencing" "")) }}
{{- fail (printf "worker.mode: %q is not admit, fence-only or no-fencing" .Values.worker.mode) }}
{{- end }}
{{- with .Values.manager.failoverPolicy }}
{{- if not (has . (list "at-most-once" "fast")) }}
{{- fail (printf "manager.failoverPolicy: %q is neither at-most-once nor fast" .) }}
{{- end }}
{{- end }}
{{- with .Values.manager.dispatchMode }}
{{- if not (has . (list "capacity-aware" "all-at-once" "incremental")) }}
{{- fail (printf "manager.dispatchMode: %q is not capacity-aware, all-at-once or incremental" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pod settings both sides share: what the image needs (user 65532, read-only root
with a writable /tmp) and the pod values. */}}
{{- define "kfed.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "kfed.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{- define "kfed.podPlacement" -}}
{{- with .Values.pod.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.pod.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.pod.hostNetwork }}
hostNetwork: true
{{- end }}
{{- end }}

{{- define "kfed.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
    {{- if .Values.observability.secureMetrics }}
    scheme: HTTPS
    {{- end }}
    {{- with .Values.pod.probeHost }}
    host: {{ . }}
    {{- end }}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
    {{- if .Values.observability.secureMetrics }}
    scheme: HTTPS
    {{- end }}
    {{- with .Values.pod.probeHost }}
    host: {{ . }}
    {{- end }}
  periodSeconds: 5
{{- end }}

{{/* The ServiceMonitor of one side (observability.prometheusOperator): every replica's
/metrics through the side's Service; HTTPS with Prometheus's ServiceAccount token when
observability.secureMetrics (the prometheus and metrics-secure components of deploy/). */}}
{{- define "kfed.serviceMonitor" -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kfed.labels" .root | nindent 4 }}
    release: kube-prometheus-stack
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  namespaceSelector:
    matchNames: [{{ .root.Release.Namespace }}]
  endpoints:
    - port: metrics
      path: /metrics
      interval: 30s
      {{- if .root.Values.observability.secureMetrics }}
      scheme: https
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
      tlsConfig:
        {{- if eq .root.Values.observability.metricsCertificates "cert-manager" }}
        serverName: {{ .name }}.{{ .root.Release.Namespace }}.svc
        ca:
          secret:
            name: {{ .name }}-metrics-tls
            key: ca.crt
        {{- else }}
        insecureSkipVerify: true
        {{- end }}
      {{- else }}
      scheme: http
      {{- end }}
{{- end }}

{{/* The pod template's annotations: Prometheus' (observability.prometheusAnnotations) and
.extra (a dict), if any. */}}
{{- define "kfed.podAnnotations" -}}
{{- $annotations := dict }}
{{- if .root.Values.observability.prometheusAnnotations }}
{{- $_ := set $annotations "prometheus.io/scrape" "true" }}
{{- $_ := set $annotations "prometheus.io/port" (toString .port) }}
{{- $_ := set $annotations "prometheus.io/path" "/metrics" }}
{{- if .root.Values.observability.secureMetrics }}
{{- $_ := set $annotations "prometheus.io/scheme" "https" }}
{{- end }}
{{- end }}
{{- with .extra }}
{{- $annotations = merge $annotations . }}
{{- end }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* env: POD_NAME, the OTLP exporter's when tracing is on, then pod.extraEnv. */}}
{{- define "kfed.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- if .root.Values.observability.tracing.enabled }}
- name: OTEL_SERVICE_NAME
  value: {{ .service }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .root.Values.observability.tracing.endpoint }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .root.Values.observability.tracing.protocol }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: service.instance.id=$(POD_NAME),k8s.pod.name=$(POD_NAME)
{{- end }}
{{- with .root.Values.pod.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The webhook writes its serving certificate to /tmp: a small memory volume. */}}
{{- define "kfed.tmpVolume" -}}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 16Mi
{{- end }}

{{/* The metrics certificate cert-manager issues (observability.metricsCertificates), served
from a mounted Secret: the argument, the mount and the volume (.name: the Deployment's). */}}
{{- define "kfed.metricsCertManager" -}}
{{- if and .Values.observability.secureMetrics (eq .Values.observability.metricsCertificates "cert-manager") }}true{{ end -}}
{{- end }}
{{- define "kfed.metricsCertArg" -}}
{{- if include "kfed.metricsCertManager" . }}
- --metrics-cert-dir=/etc/kfed/metrics-certs
{{- end }}
{{- end }}
{{- define "kfed.metricsCertMount" -}}
{{- if include "kfed.metricsCertManager" .root }}
- name: metrics-certs
  mountPath: /etc/kfed/metrics-certs
  readOnly: true
{{- end }}
{{- end }}
{{- define "kfed.metricsCertVolume" -}}
{{- if include "kfed.metricsCertManager" .root }}
- name: metrics-certs
  secret:
    secretName: {{ .name }}-metrics-tls
    defaultMode: 0440
{{- end }}
{{- end }}
