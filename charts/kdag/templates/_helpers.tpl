{{- define "kdag.name" -}}kdag{{- end -}}

{{- define "kdag.labels" -}}
app.kubernetes.io/name: {{ include "kdag.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "kdag.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kdag.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kdag.fullname" -}}{{ .Release.Name }}-kdag{{- end -}}

{{- /* Selector labels of one shard's Deployment: the unsharded one keeps the chart's original
selector (a Deployment's selector is immutable), a static shard's adds its name. */ -}}
{{- define "kdag.shardSelectorLabels" -}}
{{- if .shard -}}
app.kubernetes.io/name: {{ include "kdag.name" .root }}-shard
app.kubernetes.io/instance: {{ .root.Release.Name }}
kdag.dev/shard: {{ .shard }}
{{- else -}}
{{ include "kdag.selectorLabels" .root }}
{{- end -}}
{{- end -}}
