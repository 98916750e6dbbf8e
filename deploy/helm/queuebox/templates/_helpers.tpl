{{- define "queuebox.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "queuebox.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "queuebox.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "queuebox.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "queuebox.selectorLabels" -}}
app.kubernetes.io/name: {{ include "queuebox.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "queuebox.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "queuebox.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "queuebox.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "queuebox.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "queuebox.secretName" -}}
{{- if .Values.secrets.existingSecret }}{{ .Values.secrets.existingSecret }}{{ else }}{{ include "queuebox.fullname" . }}{{ end }}
{{- end }}

{{- define "queuebox.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The relay's configuration: the user's `config` with the chart's ports and migrations. */}}
{{- define "queuebox.config" -}}
{{- $server := dict "httpPort" (int .Values.ports.http) "managementPort" (int .Values.ports.management) }}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg "server" (merge $server (get $cfg "server" | default dict)) }}
{{- $db := get $cfg "database" | default dict }}
{{- $_ := set $db "migrate" (not .Values.migrations.enabled) }}
{{- $_ := set $cfg "database" $db }}
{{- toYaml $cfg }}
{{- end }}

{{/* The pod's security context: any non-root uid, read-only root, no capabilities. */}}
{{- define "queuebox.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}
