{{/* Name of the recorder's Deployment, ServiceAccount and roles. */}}
{{- define "dragonet.recorderName" -}}
{{- printf "%s-recorder" (include "dragonet.fullname" .) }}
{{- end }}

{{/* Selector labels of the recorder pod. */}}
{{- define "dragonet.recorderSelectorLabels" -}}
app.kubernetes.io/name: {{ include "dragonet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: recorder
{{- end }}

{{- define "dragonet.recorderServiceAccountName" -}}
{{- if .Values.recorder.serviceAccount.create }}
{{- default (include "dragonet.recorderName" .) .Values.recorder.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.recorder.serviceAccount.name }}
{{- end }}
{{- end }}
