{{/*
Names, labels and the checks every template shares.
*/}}

{{/* The chart name (app.kubernetes.io/name). */}}
{{- define "pier.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name every object name starts with: the release name, plus the
chart name unless the release name contains it ("pier" gives pier-controller,
pier-agent).
*/}}
{{- define "pier.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version for helm.sh/chart. */}}
{{- define "pier.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels of one component: dict "ctx" $ "component" "agent".
They never change across upgrades (a Deployment's or DaemonSet's selector
is immutable): no version, no chart version, nothing from values but the
names.
*/}}
{{- define "pier.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pier.name" .ctx | quote }}
app.kubernetes.io/instance: {{ .ctx.Release.Name | quote }}
{{- if .component }}
app.kubernetes.io/component: {{ .component | quote }}
{{- end }}
{{- end }}

{{/* All labels of one component's objects: dict "ctx" $ "component" "agent". */}}
{{- define "pier.labels" -}}
{{ include "pier.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: "pier"
app.kubernetes.io/managed-by: {{ .ctx.Release.Service | quote }}
helm.sh/chart: {{ include "pier.chart" .ctx | quote }}
{{- end }}

{{/*
The image of a role: dict "ctx" $ "image" .Values.agent.image.
[registry/]repository, then @digest when set, else :tag (the role's, the
shared one, then appVersion).
*/}}
{{- define "pier.image" -}}
{{- $img := .image }}
{{- $repo := required "the image repository is empty (controller.image.repository / agent.image.repository)" $img.repository }}
{{- with .ctx.Values.image.registry }}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}
{{- end }}
{{- if $img.digest }}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $img.digest) }}
{{- fail (printf "image digest %q: want sha256: and 64 hex digits" $img.digest) }}
{{- end }}
{{- printf "%s@%s" $repo $img.digest }}
{{- else }}
{{- printf "%s:%s" $repo (toString (coalesce $img.tag .ctx.Values.image.tag .ctx.Chart.AppVersion)) }}
{{- end }}
{{- end }}

{{/* The pull policy of a role: dict "ctx" $ "image" .Values.agent.image. */}}
{{- define "pier.pullPolicy" -}}
{{- coalesce .image.pullPolicy .ctx.Values.image.pullPolicy "IfNotPresent" }}
{{- end }}

{{/*
The API server's address for clusters without kube-proxy (env entries,
indented by the caller).
*/}}
{{- define "pier.kubernetesAPIEnv" -}}
{{- with .Values.kubernetesAPI.host }}
# The API server directly: this cluster has no kube-proxy (or its
# `kubernetes` Service is unreachable from the host network).
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ default 6443 $.Values.kubernetesAPI.port | toString | quote }}
{{- else }}
{{- with .Values.kubernetesAPI.port }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ . | toString | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
pier.validate fails the render on combinations values.schema.json cannot
express, with a message naming the values to set. Every template includes
it, so `helm lint`, `helm template` and `helm install` all refuse.
*/}}
{{- define "pier.validate" -}}
{{- $v := .Values }}
{{- $mode := toString $v.addressing.mode }}
{{- if not (has $mode (list "none" "vrrp" "bgp")) }}
{{- fail (printf "addressing.mode=%q: want none, vrrp or bgp" $mode) }}
{{- end }}
{{- if and (eq $mode "vrrp") (not $v.vrrp.interface) }}
{{- fail "addressing.mode=vrrp requires vrrp.interface (the interface that holds the VIPs, the same name on every node)" }}
{{- end }}
{{- if and (ne $mode "vrrp") $v.vrrp.interface }}
{{- fail (printf "vrrp.interface is set but addressing.mode=%s: set addressing.mode=vrrp, or unset vrrp.interface" $mode) }}
{{- end }}
{{- if eq $mode "bgp" }}
{{- if not $v.bgp.peers }}
{{- fail "addressing.mode=bgp requires bgp.peers (at least one {address: IP, asn: N})" }}
{{- end }}
{{- if not $v.bgp.asn }}
{{- fail "addressing.mode=bgp requires bgp.asn (this cluster's AS number)" }}
{{- end }}
{{- range $v.bgp.peers }}
{{- if not .address }}
{{- fail "bgp.peers: every peer needs an address" }}
{{- end }}
{{- if not (or .asn $v.bgp.peerASN) }}
{{- fail (printf "bgp.peers: peer %s has no asn and bgp.peerASN is unset" .address) }}
{{- end }}
{{- end }}
{{- else if $v.bgp.peers }}
{{- fail (printf "bgp.peers is set but addressing.mode=%s: set addressing.mode=bgp, or unset bgp.peers" $mode) }}
{{- end }}
{{- if not (has (toString $v.agent.onExit) (list "handover" "stay" "drain")) }}
{{- fail (printf "agent.onExit=%q: want handover, stay or drain" (toString $v.agent.onExit)) }}
{{- end }}
{{- if not (has (toString $v.logLevel) (list "debug" "info" "warn" "error")) }}
{{- fail (printf "logLevel=%q: want debug, info, warn or error" (toString $v.logLevel)) }}
{{- end }}
{{- if not (has (toString $v.logFormat) (list "text" "json")) }}
{{- fail (printf "logFormat=%q: want text or json" (toString $v.logFormat)) }}
{{- end }}
{{- end }}

{{/* The probes of a role: dict "port" "api" "probes" .Values.agent.probes. */}}
{{- define "pier.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  {{- toYaml .probes.startup | nindent 2 }}
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  {{- toYaml .probes.liveness | nindent 2 }}
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}}
  {{- toYaml .probes.readiness | nindent 2 }}
{{- end }}
