{{/* Combinations values.schema.json cannot express; each stops the install with a reason. */}}
{{- define "lockd.validate" -}}
{{- $v := .Values -}}
{{- if and (eq $v.backend "memory") (or (gt (int $v.replicaCount) 1) $v.autoscaling.enabled) -}}
{{- fail "backend memory keeps locks inside one pod: with more than one replica each pod would grant the same lock. Use replicaCount: 1 (and autoscaling.enabled: false) or a shared backend (redis, mysql, zookeeper)." -}}
{{- end -}}
{{- if and $v.tls.enabled (not $v.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret (a kubernetes.io/tls Secret with tls.crt, tls.key, and ca.crt when tls.clientAuth is not none)." -}}
{{- end -}}
{{- if and (or $v.metrics.serviceMonitor.enabled $v.metrics.prometheusRule.enabled) (not $v.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor and metrics.prometheusRule need metrics.enabled." -}}
{{- end -}}
{{- if and $v.pdb.create $v.pdb.minAvailable (ne (toString $v.pdb.maxUnavailable) "") -}}
{{- fail "pdb: set minAvailable or maxUnavailable, not both." -}}
{{- end -}}
{{- $grace := add (int $v.lifecycle.preStopSleepSeconds) (int (include "lockd.durationSeconds" $v.config.shutdownGrace)) -}}
{{- if le (int $v.terminationGracePeriodSeconds) $grace -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed lifecycle.preStopSleepSeconds + config.shutdownGrace (%d s), or in-flight calls are killed before lockd has answered them." (int $v.terminationGracePeriodSeconds) $grace) -}}
{{- end -}}
{{- end -}}

{{/* Whole seconds, rounded up, of a lockd duration such as 500ms, 5s, 2m, 1h30m. */}}
{{- define "lockd.durationSeconds" -}}
{{- $ms := 0 -}}
{{- range regexFindAll "[0-9.]+(ms|us|ns|h|m|s)" . -1 -}}
  {{- $n := float64 (regexFind "^[0-9.]+" .) -}}
  {{- $unit := regexReplaceAll "^[0-9.]+" . "" -}}
  {{- $f := get (dict "h" 3600000.0 "m" 60000.0 "s" 1000.0 "ms" 1.0 "us" 0.001 "ns" 0.000001) $unit -}}
  {{- $ms = addf $ms (mulf $n $f) -}}
{{- end -}}
{{- ceil (divf $ms 1000.0) | int -}}
{{- end -}}
