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

{{/* schedhook's placement flags, the same in its Deployment and in kube-scheduler's sidecar. */}}
{{- define "toposched.placementArgs" -}}
- --extender-client-ca=/tls/ca.crt
- --extender-client-name={{ printf "%s-scheduler" (include "toposched.fullname" .) }}
- --weights-name={{ .Values.schedhook.weightsName }}
- --strategy={{ .Values.schedhook.numaStrategy }}
- --missing-nrt={{ .Values.schedhook.missingNrt }}
- --dra-alignment={{ .Values.schedhook.draAlignment }}
- --dra-pin={{ .Values.schedhook.draPin }}
- --log-level={{ .Values.schedhook.logLevel }}
{{- end -}}

{{/* Replicas of a component spread over nodes: preferred, or required on the host network (their ports would clash). */}}
{{- define "toposched.spread" -}}
podAntiAffinity:
  {{- if .root.Values.hostNetwork.enabled }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels: {{- include "toposched.selector" . | nindent 10 }}
  {{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels: {{- include "toposched.selector" . | nindent 12 }}
  {{- end }}
{{- end -}}

{{/* A PodDisruptionBudget keeping one replica of a component of several (a drain never takes the last). */}}
{{- define "toposched.pdb" -}}
{{- if gt (int .replicas) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "toposched.labels" .root | nindent 4 }}
spec:
  minAvailable: 1
  selector:
    matchLabels: {{- include "toposched.selector" (dict "root" .root "component" .component) | nindent 6 }}
{{- end }}
{{- end -}}

{{/* schedhook's extender as a container of each kube-scheduler replica, reached over the pod's loopback:
     kube-scheduler's own leader election decides which extender is called, and the extender acts only
     while its scheduler holds the Lease (read from the apiserver). It keeps its store warm meanwhile. */}}
{{/* Is schedhook's extender a sidecar of each kube-scheduler replica? */}}
{{- define "toposched.sidecar" -}}
{{- if and .Values.scheduler.enabled .Values.scheduler.extenderSidecar .Values.schedhook.enabled }}true{{ end }}
{{- end -}}

{{- define "toposched.extenderSidecar" -}}
- name: extender
  image: {{ include "toposched.image" (dict "root" . "which" "operator") }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if or .Values.hostNetwork.enabled .Values.hostNetwork.apiServer }}
  env:
    {{- if .Values.hostNetwork.enabled }}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    {{- end }}
    {{- include "toposched.apiServerEnv" . | nindent 4 }}
  {{- end }}
  args:
    - schedhook
    {{- if .Values.hostNetwork.enabled }}
    # At the node's address: the host's loopback may be shared by several nodes (kubelets on one
    # machine, as the project's local cluster), whose sidecars would clash there.
    - --address=$(POD_IP)
    - --metrics-address=$(POD_IP)
    {{- end }}
    - --port={{ .Values.scheduler.extenderPort }}
    - --metrics-port={{ .Values.scheduler.extenderMetricsPort }}
    {{- if not .Values.hostNetwork.enabled }}
    # kube-scheduler in this pod calls here (plain HTTP on the pod's loopback).
    - --loopback-port={{ .Values.scheduler.extenderLoopbackPort }}
    {{- end }}
    # The extender alone: the webhooks and the controllers are schedhook's Deployment's.
    - --extender-tls-cert=/tls/tls.crt
    - --extender-tls-key=/tls/tls.key
    - --no-controllers
    {{- include "toposched.placementArgs" . | nindent 4 }}
    {{- if .Values.scheduler.leaderElection }}
    - --scheduler-lease={{ .Release.Namespace }}/toposched-scheduler
    {{- end }}
  ports:
    - {name: ext-metrics, containerPort: {{ .Values.scheduler.extenderMetricsPort }}}
  {{- range $probe, $period := dict "livenessProbe" 20 "readinessProbe" 5 }}
  {{ $probe }}:
    httpGet:
      path: {{ ternary "/healthz" "/readyz" (eq $probe "livenessProbe") }}
      port: {{ $.Values.scheduler.extenderPort }}
      scheme: HTTPS
    periodSeconds: {{ $period }}
  {{- end }}
  resources: {{- toYaml .Values.schedhook.resources | nindent 4 }}
  securityContext: {{- include "toposched.restricted" . | nindent 4 }}
  volumeMounts:
    - {name: extender-tls, mountPath: /tls, readOnly: true}
{{- end -}}
