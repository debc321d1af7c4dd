{{/* The install notes (NOTES.txt), a template of their own so that tests can render them. */}}
{{- define "lockd.notes" -}}
lockd {{ .Chart.AppVersion }} is deployed as {{ include "lockd.fullname" . }} in namespace {{ .Release.Namespace }}
({{ if .Values.autoscaling.enabled }}{{ .Values.autoscaling.minReplicas }}-{{ .Values.autoscaling.maxReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }} replica(s), backend {{ .Values.backend }}).

In the cluster, clients reach it at {{ include "lockd.fullname" . }}.{{ .Release.Namespace }}.svc:{{ .Values.service.port }}
{{- if .Values.service.headless.enabled }}
(or dns:///{{ include "lockd.fullname" . }}-headless.{{ .Release.Namespace }}.svc:{{ .Values.service.port }} with round_robin)
{{- end }}.
{{- if .Values.networkPolicy.enabled }}
The NetworkPolicy admits client pods labelled:
{{ include "lockd.clientLabels" . | indent 2 }}
{{- end }}

From your machine, through a port-forward:

  kubectl --namespace {{ .Release.Namespace }} port-forward svc/{{ include "lockd.fullname" . }} 7411:{{ .Values.service.port }} &
{{- if .Values.tls.enabled }}
  # TLS is on: give grpcurl the CA (and -cert/-key when tls.clientAuth is require),
  # and -authority with a name in the server certificate.
{{- end }}
  grpcurl {{ if .Values.tls.enabled }}-cacert ca.crt{{ else }}-plaintext{{ end }} -d '{"service":"lockd.v1.LockService"}' 127.0.0.1:7411 grpc.health.v1.Health/Check
  grpcurl {{ if .Values.tls.enabled }}-cacert ca.crt{{ else }}-plaintext{{ end }} -d '{"name":"orders/42","owner":"me","lease_ttl":"30s"}' 127.0.0.1:7411 lockd.v1.LockService/Acquire
  grpcurl {{ if .Values.tls.enabled }}-cacert ca.crt{{ else }}-plaintext{{ end }} -d '{"name":"orders/42","owner":"me"}' 127.0.0.1:7411 lockd.v1.LockService/Release
{{- if not .Values.tls.enabled }}

or with lockctl from inside a pod:

  kubectl --namespace {{ .Release.Namespace }} exec deploy/{{ include "lockd.fullname" . }} -- lockctl describe --name orders/42
{{- end }}
{{- end -}}
