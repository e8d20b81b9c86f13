{{/*
Chart name, truncated to 63 characters (the DNS label limit).
*/}}
{{- define "dragonet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the release name, prefixed with the chart name unless it already contains it.
Object names add a suffix (-webhook, -tfjobs), so keep room for it.
*/}}
{{- define "dragonet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of the webhook Deployment and Service. */}}
{{- define "dragonet.webhookName" -}}
{{- printf "%s-webhook" (include "dragonet.fullname" .) }}
{{- end }}

{{- define "dragonet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "dragonet.labels" -}}
helm.sh/chart: {{ include "dragonet.chart" . }}
app.kubernetes.io/name: {{ include "dragonet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dragonet
{{- end }}

{{/* Selector labels of the webhook pods. */}}
{{- define "dragonet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dragonet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "dragonet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dragonet.webhookName" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The webhook's host as Metacontroller reaches it: the Service, on port 80 (http) or 443
(https), so the URL carries no port. */}}
{{- define "dragonet.webhookHost" -}}
{{- printf "%s.%s" (include "dragonet.webhookName" .) .Release.Namespace }}
{{- end }}

{{/* Base URL of the webhook as Metacontroller reaches it. */}}
{{- define "dragonet.webhookURL" -}}
{{- printf "%s://%s" (include "dragonet.scheme" .) (include "dragonet.webhookHost" .) }}
{{- end }}

{{/* http, or https with tls.enabled; also the name of the webhook's container port. */}}
{{- define "dragonet.scheme" -}}
{{- ternary "https" "http" .Values.tls.enabled }}
{{- end }}

{{- /*
The gang schedulers whose PodGroups the job controllers own: scheduling.gangSchedulers plus
the default pool's, sorted, as a JSON list.
*/}}
{{- define "dragonet.gangSchedulers" -}}
{{- $all := .Values.scheduling.gangSchedulers | default list }}
{{- if and .Values.scheduling.createDefaultPool (ne .Values.scheduling.gangScheduler "none") }}
{{- $all = append $all .Values.scheduling.gangScheduler }}
{{- end }}
{{- $all | uniq | sortAlpha | toJson }}
{{- end }}
{{- /* The PodGroup apiVersion of each gang scheduler, as a JSON object. */}}
{{- define "dragonet.podGroupAPIVersions" -}}
{{- dict "kube-batch" "scheduling.incubator.k8s.io/v1alpha1" "volcano" "scheduling.volcano.sh/v1beta1" "coscheduling" "scheduling.x-k8s.io/v1alpha1" | toJson }}
{{- end }}

{{/* Name of the Container Monitor's DaemonSet, Service, ServiceAccount and roles. */}}
{{- define "dragonet.monitorName" -}}
{{- printf "%s-monitor" (include "dragonet.fullname" .) }}
{{- end }}

{{/* Selector labels of the monitor pods. */}}
{{- define "dragonet.monitorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "dragonet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: monitor
{{- end }}

{{- define "dragonet.monitorServiceAccountName" -}}
{{- if .Values.monitor.serviceAccount.create }}
{{- default (include "dragonet.monitorName" .) .Values.monitor.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.monitor.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Name of the reaper's Deployment, ServiceAccount and roles. */}}
{{- define "dragonet.reaperName" -}}
{{- printf "%s-reaper" (include "dragonet.fullname" .) }}
{{- end }}

{{/* Selector labels of the reaper pod. */}}
{{- define "dragonet.reaperSelectorLabels" -}}
app.kubernetes.io/name: {{ include "dragonet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: reaper
{{- end }}

{{- define "dragonet.reaperServiceAccountName" -}}
{{- if .Values.reaper.serviceAccount.create }}
{{- default (include "dragonet.reaperName" .) .Values.reaper.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.reaper.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret with the webhook's certificate (tls.crt, tls.key, ca.crt): tls.secretName,
or the one the chart makes when that is empty (webhook-secrets.yaml). */}}
{{- define "dragonet.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "dragonet.webhookName" .)) .Values.tls.secretName }}
{{- end }}

{{/* The Secret with the hooks' shared secret: auth.secretName, or the chart's own. */}}
{{- define "dragonet.authSecretName" -}}
{{- default (printf "%s-token" (include "dragonet.webhookName" .)) .Values.auth.secretName }}
{{- end }}

{{/* Whether the cluster serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
(GA in Kubernetes 1.30): the policies that narrow the monitor's and the reaper's writes
below what RBAC can say (rbac.admissionPolicies). */}}
{{- define "dragonet.admissionPolicies" -}}
{{- if and .Values.rbac.admissionPolicies (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) }}true{{- end }}
{{- end }}

{{/*
The webhook container's memory limit in Mi: every worker's cap on what it keeps between
requests, its baseline and what requests in flight take (values.yaml, server.memory*).
*/}}
{{- define "dragonet.memoryLimitMi" -}}
{{- $s := .Values.server -}}
{{- mul (int64 $s.workers) (add (int64 $s.memoryCapMi) (int64 $s.memoryBaselineMi) (int64 $s.memoryInflightMi)) -}}
{{- end -}}

{{/*
The job kinds' resources, one CompositeController and one set of RBAC rules each: the plurals
of policy.model.kinds.KINDS (tests/test_chart.py checks the two agree). To add a kind, add
its plural here.
*/}}
{{- define "dragonet.jobPlurals" -}}
{{- list "tfjobs" "mxjobs" "pytorchjobs" | toJson -}}
{{- end -}}

{{/* The job resources with each suffix, kind by kind: (list "" "/status") gives tfjobs,
tfjobs/status, mxjobs, mxjobs/status. A JSON list, which is YAML. */}}
{{- define "dragonet.jobResources" -}}
{{- $out := list -}}
{{- range $plural := include "dragonet.jobPlurals" . | fromJsonArray -}}
{{- range $suffix := $ -}}
{{- $out = append $out (printf "%s%s" $plural $suffix) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
