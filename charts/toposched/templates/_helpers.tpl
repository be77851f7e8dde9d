{{- define "toposched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "toposched.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "toposched.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "toposched.image" -}}
{{- $image := index .root.Values.image .which -}}
{{ $image.repository }}:{{ $image.tag | default .root.Chart.AppVersion }}
{{- end -}}

{{/* Pod security shared by the components that need no privileges. */}}
{{- define "toposched.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The API server's address for in-cluster clients, when the values name one (hostNetwork.apiServer). */}}
{{- define "toposched.apiServerEnv" -}}
{{- with .Values.hostNetwork.apiServer }}
{{- $host := regexReplaceAll ":[0-9]+$" . "" | trimPrefix "[" | trimSuffix "]" }}
{{- $port := regexFind "[0-9]+$" . }}
- {name: KUBERNETES_SERVICE_HOST, value: {{ $host | quote }}}
- {name: KUBERNETES_SERVICE_PORT, value: {{ $port | quote }}}
{{- end }}
{{- end -}}

{{/* Pod-level networking of the operator, schedhook and kube-scheduler. */}}
{{- define "toposched.podNetwork" -}}
{{- if .Values.hostNetwork.enabled }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- end -}}
