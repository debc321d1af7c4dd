{{/*
lockd's configuration file (docs/operations/configuration.md): the chart's
values mapped to lockd's own keys. Only the selected backend's section is
written; numbers go through int so that YAML never holds 1e+06 for lockd to
refuse; secrets appear only as file paths.
*/}}
{{- define "lockd.config" -}}
{{- $v := .Values -}}
{{- $c := dict "listen" (printf "0.0.0.0:%d" (int $v.containerPorts.grpc)) "backend" $v.backend -}}
{{- $_ := set $c "lease" (dict "default" $v.config.lease.default "min" $v.config.lease.min "max" $v.config.lease.max) -}}
{{- $_ = set $c "max_waiters" (int64 $v.config.maxWaiters) -}}
{{- $_ = set $c "log_level" $v.config.logLevel -}}
{{- $_ = set $c "shutdown_grace" $v.config.shutdownGrace -}}
{{- $secretFile := include "lockd.secretFile" . -}}
{{- if eq $v.backend "redis" -}}
  {{- $r := dict "mode" $v.redis.mode "addresses" (join "," $v.redis.addresses) "db" (int $v.redis.db) "key_prefix" $v.redis.keyPrefix "pool_size" (int $v.redis.poolSize) "connect_timeout" $v.redis.connectTimeout "command_timeout" $v.redis.commandTimeout "fence_retention" $v.redis.fenceRetention -}}
  {{- if $v.redis.username }}{{ $_ = set $r "username" $v.redis.username }}{{ end -}}
  {{- if eq $v.redis.mode "sentinel" }}{{ $_ = set $r "sentinel_master" $v.redis.sentinelMaster }}{{ end -}}
  {{- if $secretFile }}{{ $_ = set $r "password_file" $secretFile }}{{ end -}}
  {{- $_ = set $c "redis" $r -}}
{{- else if eq $v.backend "mysql" -}}
  {{- $m := dict "host" $v.mysql.host "port" (int $v.mysql.port) "user" $v.mysql.user "database" $v.mysql.database "table_prefix" $v.mysql.tablePrefix "pool_size" (int $v.mysql.poolSize) "sweep_interval" $v.mysql.sweepInterval "fence_retention" $v.mysql.fenceRetention "fair_slice" $v.mysql.fairSlice "connect_timeout" $v.mysql.connectTimeout "read_timeout" $v.mysql.readTimeout "write_timeout" $v.mysql.writeTimeout "ssl_mode" $v.mysql.ssl.mode -}}
  {{- if $secretFile }}{{ $_ = set $m "password_file" $secretFile }}{{ end -}}
  {{- if $v.mysql.ssl.existingSecret -}}
    {{- $_ = set $m "ssl_ca" "/etc/lockd/mysql-tls/ca.crt" -}}
    {{- $_ = set $m "ssl_cert" "/etc/lockd/mysql-tls/tls.crt" -}}
    {{- $_ = set $m "ssl_key" "/etc/lockd/mysql-tls/tls.key" -}}
  {{- end -}}
  {{- $_ = set $c "mysql" $m -}}
{{- else if eq $v.backend "zookeeper" -}}
  {{- $z := dict "hosts" (join "," $v.zookeeper.hosts) "root" $v.zookeeper.root "session_timeout" $v.zookeeper.sessionTimeout "reap_interval" $v.zookeeper.reapInterval -}}
  {{- if $secretFile }}{{ $_ = set $z "auth_file" $secretFile }}{{ end -}}
  {{- $_ = set $c "zookeeper" $z -}}
{{- end -}}
{{- if $v.metrics.enabled -}}
  {{- $_ = set $c "metrics" (dict "listen" (printf "0.0.0.0:%d" (int $v.containerPorts.metrics))) -}}
{{- end -}}
{{- if $v.tls.enabled -}}
  {{- $t := dict "cert_file" "/etc/lockd/tls/tls.crt" "key_file" "/etc/lockd/tls/tls.key" "client_auth" $v.tls.clientAuth -}}
  {{- if ne $v.tls.clientAuth "none" }}{{ $_ = set $t "client_ca_file" "/etc/lockd/tls/ca.crt" }}{{ end -}}
  {{- $_ = set $c "tls" $t -}}
  {{- $_ = set $c "health" (dict "listen" (printf "0.0.0.0:%d" (int $v.containerPorts.health))) -}}
{{- end -}}
{{- $c = mergeOverwrite $c (deepCopy $v.config.extra) -}}
{{- toYaml $c -}}
{{- end -}}
