{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "kubedevice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: the release name alone when it already contains the chart name. */}}
{{- define "kubedevice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubedevice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubedevice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubedevice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubedevice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The config file the daemon reads: the paths and the dra section come from the chart's own keys. */}}
{{- define "kubedevice.config" -}}
plugin_dir: {{ .Values.pluginDir }}
host_root: {{ .Values.hostRoot.path }}
cdi_dir: {{ .Values.cdi.dir }}
{{- if .Values.dra.enabled }}
dra:
  driver: {{ required "dra.driverName is required when dra.enabled" .Values.dra.driverName | quote }}
  rolling_update: {{ .Values.dra.rollingUpdate }}
  {{- if .Values.dra.deviceStatus }}
  device_status: true
  {{- end }}
  {{- if .Values.dra.deviceMetadata }}
  device_metadata: true
  {{- end }}
{{- end }}
{{ toYaml (omit .Values.config "plugin_dir" "host_root" "cdi_dir" "dra") }}
{{- end }}

{{/* The kubelet's PodResources directory, where the daemon looks for it: under the kubelet root
(--kubelet-dir for DRA, else the plugin directory's parent). */}}
{{- define "kubedevice.podResourcesDir" -}}
{{- if .Values.dra.enabled }}{{ .Values.dra.kubeletDir }}{{ else }}{{ dir .Values.pluginDir }}{{ end }}/pod-resources
{{- end }}

{{/* Whether the daemon reads its DaemonSet at SIGTERM to remove its CDI specs on uninstall.
In DRA mode the specs belong to prepared claims and go when the kubelet unprepares them. */}}
{{- define "kubedevice.ownerCheck" -}}
{{- if and .Values.cdi.removeOnUninstall (not .Values.dra.enabled) }}true{{ end }}
{{- end }}

{{/* Whether the daemon reads its Node's labels: some resource has a node_selector (device plugins only). */}}
{{- define "kubedevice.nodeLabels" -}}
{{- $selected := .Values.nodeLabels.enabled }}
{{- range .Values.config.resources }}{{ if .node_selector }}{{ $selected = true }}{{ end }}{{ end }}
{{- if and $selected (not .Values.dra.enabled) }}true{{ end }}
{{- end }}

{{/* Whether the pod gets a ServiceAccount token: only for what calls the API server. */}}
{{- define "kubedevice.needsApi" -}}
{{- if or .Values.dra.enabled .Values.resourceSlices.enabled (include "kubedevice.ownerCheck" .) (include "kubedevice.nodeLabels" .) }}true{{ end }}
{{- end }}

{{/* The ServiceAccount's full user name, as the admission policy matches it. */}}
{{- define "kubedevice.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "kubedevice.fullname" . }}
{{- end }}

{{- define "kubedevice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* hostService runs kubedevice as a systemd unit, which has no API credentials, and removes it
on uninstall by the owner check. */}}
{{- define "kubedevice.hostServiceChecks" -}}
{{- if or .Values.dra.enabled .Values.resourceSlices.enabled (include "kubedevice.nodeLabels" .) }}
{{- fail "hostService.enabled: the host service has no API access (no dra, resourceSlices or node_selector)" }}
{{- end }}
{{- if not (include "kubedevice.ownerCheck" .) }}
{{- fail "hostService.enabled needs cdi.removeOnUninstall: it is how helm uninstall removes the unit" }}
{{- end }}
{{- end }}
