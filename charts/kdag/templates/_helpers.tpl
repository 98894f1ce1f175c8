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
