{{/* Names and labels. */}}
{{- define "lockd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lockd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "lockd.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "lockd.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lockd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lockd.labels" -}}
{{ include "lockd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations of every object (commonAnnotations), or nothing. */}}
{{- define "lockd.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "lockd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lockd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lockd.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry }}{{ $repo = printf "%s/%s" .Values.image.registry $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "lockd.clientLabels" -}}
{{- if .Values.networkPolicy.clientLabels -}}
{{- toYaml .Values.networkPolicy.clientLabels -}}
{{- else -}}
{{ include "lockd.fullname" . }}-client: "true"
{{- end -}}
{{- end -}}

{{/*
The Secret the chart creates. Its name differs from the ConfigMap's: podman
kube play keeps both in volumes named after them, and one name would merge them.
*/}}
{{- define "lockd.secretName" -}}
{{- printf "%s-credentials" (include "lockd.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Secrets. The password of the selected backend comes from an existing Secret
(named in values) or from one the chart creates (<fullname>-credentials), and is mounted
as a file under /etc/lockd/secrets; lockd reads it through *.password_file
(zookeeper.auth_file). "lockd.secret" prints "secretName key file" when the
backend has a credential, nothing otherwise.
*/}}
{{- define "lockd.secret" -}}
{{- $b := .Values.backend -}}
{{- if eq $b "redis" -}}
  {{- with .Values.redis.auth -}}
  {{- if .existingSecret }}{{ printf "%s %s redis-password" .existingSecret .existingSecretPasswordKey }}
  {{- else if .password }}{{ printf "%s redis-password redis-password" (include "lockd.secretName" $) }}{{ end -}}
  {{- end -}}
{{- else if eq $b "mysql" -}}
  {{- with .Values.mysql.auth -}}
  {{- if .existingSecret }}{{ printf "%s %s mysql-password" .existingSecret .existingSecretPasswordKey }}
  {{- else if .password }}{{ printf "%s mysql-password mysql-password" (include "lockd.secretName" $) }}{{ end -}}
  {{- end -}}
{{- else if eq $b "zookeeper" -}}
  {{- with .Values.zookeeper.auth -}}
  {{- if .existingSecret }}{{ printf "%s %s zookeeper-auth" .existingSecret .existingSecretKey }}
  {{- else if .credentials }}{{ printf "%s zookeeper-auth zookeeper-auth" (include "lockd.secretName" $) }}{{ end -}}
  {{- end -}}
{{- end -}}
{{- end -}}

{{/* The value the chart-created Secret holds, or "" when it creates none. */}}
{{- define "lockd.chartSecretValue" -}}
{{- $b := .Values.backend -}}
{{- if and (eq $b "redis") (not .Values.redis.auth.existingSecret) }}{{ .Values.redis.auth.password }}
{{- else if and (eq $b "mysql") (not .Values.mysql.auth.existingSecret) }}{{ .Values.mysql.auth.password }}
{{- else if and (eq $b "zookeeper") (not .Values.zookeeper.auth.existingSecret) }}{{ .Values.zookeeper.auth.credentials }}
{{- end -}}
{{- end -}}

{{- define "lockd.secretFile" -}}
{{- $s := include "lockd.secret" . -}}
{{- if $s }}{{ printf "/etc/lockd/secrets/%s" (index (splitList " " $s) 2) }}{{ end -}}
{{- end -}}

{{/* Whether the plaintext health port serves the probes (TLS on the gRPC port). */}}
{{- define "lockd.healthPort" -}}
{{- if .Values.tls.enabled }}{{ .Values.containerPorts.health }}{{ else }}{{ .Values.containerPorts.grpc }}{{ end -}}
{{- end -}}

{{/* The backend's TCP ports, for the NetworkPolicy's egress. */}}
{{- define "lockd.backendPorts" -}}
{{- $ports := list -}}
{{- if eq .Values.backend "redis" -}}
  {{- range .Values.redis.addresses }}{{ $ports = append $ports (last (splitList ":" .)) }}{{ end -}}
{{- else if eq .Values.backend "mysql" -}}
  {{- $ports = append $ports (toString .Values.mysql.port) -}}
{{- else if eq .Values.backend "zookeeper" -}}
  {{- range .Values.zookeeper.hosts }}{{ $ports = append $ports (last (splitList ":" .)) }}{{ end -}}
{{- end -}}
{{- uniq $ports | join " " -}}
{{- end -}}
