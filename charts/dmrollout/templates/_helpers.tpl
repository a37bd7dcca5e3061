{{/* Names ----------------------------------------------------------------------------------- */}}

{{- define "dmrollout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names get suffixes (-controller-metrics, 19 characters): keep room for them. */}}
{{- define "dmrollout.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dmrollout.controllerName" -}}{{ include "dmrollout.fullname" . }}-controller{{- end -}}
{{- define "dmrollout.workerName" -}}{{ include "dmrollout.fullname" . }}-worker{{- end -}}
{{- define "dmrollout.leaseName" -}}{{ include "dmrollout.fullname" . }}-controller{{- end -}}
{{- /* The hub's pipeline controller: its Deployment, ServiceAccount, grants and Lease. */ -}}
{{- define "dmrollout.pipelineControllerName" -}}{{ include "dmrollout.fullname" . }}-pipeline-controller{{- end -}}

{{- define "dmrollout.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "dmrollout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dmrollout
{{- end -}}

{{/* dict "ctx" $ "component" "controller" */}}
{{- define "dmrollout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dmrollout.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dmrollout.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Settings as environment ---------------------------------------------------------------- */}}

{{/* DMROLLOUT_TEMPORAL_*: controller/temporal/client.py TemporalSettings. */}}
{{- define "dmrollout.temporalEnv" -}}
{{- $t := .Values.temporal -}}
- name: DMROLLOUT_TEMPORAL_ADDRESS
  value: {{ $t.address | quote }}
- name: DMROLLOUT_TEMPORAL_NAMESPACE
  value: {{ $t.namespace | quote }}
- name: DMROLLOUT_TEMPORAL_TASK_QUEUE
  value: {{ $t.taskQueue | quote }}
{{- with $t.pipelinesNamespace }}
- name: DMROLLOUT_TEMPORAL_PIPELINES_NAMESPACE
  value: {{ . | quote }}
{{- end }}
- name: DMROLLOUT_TEMPORAL_MIN_RETENTION_DAYS
  value: {{ $t.minRetentionDays | quote }}
{{- with $t.uiUrl }}
- name: DMROLLOUT_TEMPORAL_UI_URL
  value: {{ . | quote }}
{{- end }}
{{- if $t.tls.enabled }}
- name: DMROLLOUT_TEMPORAL_TLS
  value: "true"
{{- end }}
{{- with $t.tls.serverName }}
- name: DMROLLOUT_TEMPORAL_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if $t.tls.caSecret.name }}
- name: DMROLLOUT_TEMPORAL_SERVER_CA_FILE
  value: /etc/dmrollout/temporal-ca/ca.crt
{{- end }}
{{- if $t.tls.clientCertSecret.name }}
- name: DMROLLOUT_TEMPORAL_CLIENT_CERT_FILE
  value: /etc/dmrollout/temporal-client/tls.crt
- name: DMROLLOUT_TEMPORAL_CLIENT_KEY_FILE
  value: /etc/dmrollout/temporal-client/tls.key
{{- end }}
{{- if $t.apiKey.existingSecret }}
{{- /* A mounted file, not an environment variable: the kubelet updates it when the Secret
rotates, and the controller reads it again when Temporal refuses the old key. */}}
- name: DMROLLOUT_TEMPORAL_API_KEY_FILE
  value: /etc/dmrollout/temporal-api-key/api-key
{{- end }}
{{- with $t.payloadCodec }}
{{- if .enabled }}
{{- if not .secretName }}
{{- fail "temporal.payloadCodec.enabled needs temporal.payloadCodec.secretName (the Secret of the keys)" }}
{{- end }}
{{- if not .currentKeyId }}
{{- fail "temporal.payloadCodec.enabled needs temporal.payloadCodec.currentKeyId (the key ID to encrypt with)" }}
{{- end }}
{{- if and .keyIds (not (has .currentKeyId .keyIds)) }}
{{- fail "temporal.payloadCodec.currentKeyId must be one of temporal.payloadCodec.keyIds" }}
{{- end }}
- name: DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR
  value: /etc/dmrollout/payload-keys
- name: DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID
  value: {{ .currentKeyId | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* DMROLLOUT_*: decisionmodel/rollout/settings.py RolloutSettings (lists as JSON), and the proxy. */}}
{{- define "dmrollout.rolloutEnv" -}}
- name: DMROLLOUT_ALLOWED_REGISTRIES
  value: {{ .Values.allowedRegistries | toJson | quote }}
- name: DMROLLOUT_ALLOW_INSECURE_REGISTRIES
  value: {{ .Values.allowInsecureRegistries | quote }}
- name: DMROLLOUT_ALLOW_IMAGE_OVERRIDE
  value: {{ .Values.allowImageOverride | quote }}
{{- /* Only when set: the programs then fall back to OLLAYA_REGISTRY (the reference's), which
this variable would shadow (DMROLLOUT_* comes first), else https://ollaya.dev. */}}
{{- with .Values.ollayaRegistry }}
- name: DMROLLOUT_OLLAYA_REGISTRY
  value: {{ . | quote }}
{{- end }}
{{- with .Values.ollayaHfEndpoint }}
- name: DMROLLOUT_OLLAYA_HF_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.pipelines.stageCluster }}
- name: DMROLLOUT_STAGE_CLUSTER
  value: {{ . | quote }}
{{- end }}
- name: DMROLLOUT_PIPELINE_HUB
  value: {{ .Values.pipelines.hub | quote }}
{{- /* Signed decision records (docs/audit.md): the worker writes them, the controller asks
each rollout for them. */}}
{{- if .Values.decisionRecords.enabled }}
- name: DMROLLOUT_DECISION_RECORDS_NAMESPACE
  value: {{ default .Release.Namespace .Values.decisionRecords.namespace | quote }}
- name: DMROLLOUT_DECISION_RECORDS_KEY_SECRET
  value: {{ .Values.decisionRecords.keySecret | quote }}
{{- end }}
{{- with .Values.runtimeVersion }}
- name: DMROLLOUT_RUNTIME_VERSION
  value: {{ . | quote }}
{{- end }}
{{- $pl := .Values.placement }}
- name: DMROLLOUT_PLACEMENT_PROFILE
  value: {{ $pl.profile | default "Passthrough" | quote }}
- name: DMROLLOUT_ALLOWED_TOLERATION_KEYS
  value: {{ $pl.allowedTolerationKeys | toJson | quote }}
- name: DMROLLOUT_ALLOWED_NODE_SELECTOR_KEYS
  value: {{ $pl.allowedNodeSelectorKeys | toJson | quote }}
- name: DMROLLOUT_ALLOWED_AFFINITY_KEYS
  value: {{ $pl.allowedAffinityKeys | toJson | quote }}
- name: DMROLLOUT_ALLOWED_RUNTIME_CLASSES
  value: {{ $pl.allowedRuntimeClasses | toJson | quote }}
- name: DMROLLOUT_ALLOWED_PRIORITY_CLASSES
  value: {{ $pl.allowedPriorityClasses | toJson | quote }}
- name: DMROLLOUT_MAX_REPLICAS
  value: {{ $pl.maxReplicas | quote }}
- name: DMROLLOUT_SCRATCH_SIZE_LIMIT
  value: {{ $pl.scratchSizeLimit | quote }}
{{- include "dmrollout.proxyEnv" . }}
{{- end -}}

{{/*
The registry client honours HTTP(S)_PROXY/NO_PROXY (httpx reads them, and their lower-case
spellings); DMROLLOUT_*_PROXY are what prefetch Jobs get. From a Secret, each key is optional, so
a Secret with only HTTPS_PROXY works, and the reference chart's layout (keys httpProxy, httpsProxy,
noProxy) is read too, into the lower-case variables, which the programs read as well (seed 001:
the standard proxy variables): a Secret carried over from the reference operator keeps its proxy
(issue 34: with only the upper-case keys read, it silently gave none).
*/}}
{{- define "dmrollout.proxyEnv" -}}
{{- $p := .Values.proxy -}}
{{- $pairs := list (list "HTTP_PROXY" "httpProxy") (list "HTTPS_PROXY" "httpsProxy") (list "NO_PROXY" "noProxy") -}}
{{- range $pairs }}
{{- $var := index . 0 }}
{{- $value := index $p (index . 1) }}
{{- range $name := list $var (printf "DMROLLOUT_%s" $var) }}
{{- if $p.existingSecret }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $p.existingSecret }}
      key: {{ $var }}
      optional: true
{{- else if $value }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- if $p.existingSecret }}
- name: {{ lower $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $p.existingSecret }}
      key: {{ index . 1 }}
      optional: true
{{- end }}
{{- end }}
{{- end -}}

{{/* Pods ------------------------------------------------------------------------------------- */}}

{{- define "dmrollout.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "dmrollout.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The read-only root filesystem's writable /tmp, the metrics certificate, and the Temporal
TLS material. */}}
{{- define "dmrollout.volumes" -}}
{{ include "dmrollout.tmpVolume" . }}
{{- if and .Values.metrics.secure .Values.metrics.certSecret }}
- name: metrics-tls
  secret:
    secretName: {{ .Values.metrics.certSecret }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- include "dmrollout.temporalVolumes" . }}
{{- end -}}

{{/* The pipeline controller's: /tmp and the Temporal material only (it serves no metrics). */}}
{{- define "dmrollout.pipelineControllerVolumes" -}}
{{ include "dmrollout.tmpVolume" . }}
{{- include "dmrollout.temporalVolumes" . }}
{{- end -}}

{{- define "dmrollout.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/* Each line starts with a newline: appended to a list of volumes. */}}
{{- define "dmrollout.temporalVolumes" -}}
{{- with .Values.temporal.tls.caSecret }}
{{- if .name }}
- name: temporal-ca
  secret:
    secretName: {{ .name }}
    items:
      - key: {{ .key }}
        path: ca.crt
{{- end }}
{{- end }}
{{- with .Values.temporal.tls.clientCertSecret }}
{{- if .name }}
- name: temporal-client
  secret:
    secretName: {{ .name }}
    defaultMode: 0440
    items:
      - key: {{ .certKey }}
        path: tls.crt
      - key: {{ .keyKey }}
        path: tls.key
{{- end }}
{{- end }}
{{- with .Values.temporal.apiKey }}
{{- if .existingSecret }}
- name: temporal-api-key
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .key }}
        path: api-key
{{- end }}
{{- end }}
{{- with .Values.temporal.payloadCodec }}
{{- if .enabled }}
- name: payload-keys
  secret:
    secretName: {{ .secretName }}
    defaultMode: 0440
    {{- with .keyIds }}
    items:
      {{- range . }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "dmrollout.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .Values.metrics.secure .Values.metrics.certSecret }}
- name: metrics-tls
  mountPath: /etc/dmrollout/metrics-tls
  readOnly: true
{{- end }}
{{- include "dmrollout.temporalVolumeMounts" . }}
{{- end -}}

{{- define "dmrollout.pipelineControllerVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- include "dmrollout.temporalVolumeMounts" . }}
{{- end -}}

{{/* Each line starts with a newline, as dmrollout.temporalVolumes. */}}
{{- define "dmrollout.temporalVolumeMounts" -}}
{{- if .Values.temporal.tls.caSecret.name }}
- name: temporal-ca
  mountPath: /etc/dmrollout/temporal-ca
  readOnly: true
{{- end }}
{{- if .Values.temporal.tls.clientCertSecret.name }}
- name: temporal-client
  mountPath: /etc/dmrollout/temporal-client
  readOnly: true
{{- end }}
{{- if .Values.temporal.apiKey.existingSecret }}
- name: temporal-api-key
  mountPath: /etc/dmrollout/temporal-api-key
  readOnly: true
{{- end }}
{{- if .Values.temporal.payloadCodec.enabled }}
- name: payload-keys
  mountPath: /etc/dmrollout/payload-keys
  readOnly: true
{{- end }}
{{- end -}}

{{- define "dmrollout.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
What each component may do where DecisionModels live, derived from the API server's audit log of
the e2e suite (docs/rbac.md) and equal to deploy/rbac and deploy/namespaced (tests/unit/ship/
test_rbac_guard.py). No wildcards; Secrets and ConfigMaps get-only, by the name a DecisionModel
references, never listed or watched.
*/}}
{{- define "dmrollout.controllerRules" -}}
# watch them; patch: remove the promote annotation once acted on
- apiGroups: ["decisionmodel.io"]
  resources: ["decisionmodels"]
  verbs: ["get", "list", "watch", "patch"]
# its status fields (server-side apply)
- apiGroups: ["decisionmodel.io"]
  resources: ["decisionmodels/status"]
  verbs: ["patch"]
# the serving Pods it re-inspects (by label)
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
# the decisionmodel.io/model-ready readiness gate
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
# restore / repair the stable's Deployment; reap an orphan revision's
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# restore the Service or switch its selector back to the stable (never deleted; read from
# the watch-fed cache, so no get)
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "watch", "create", "patch"]
# restore the stable's PDB, delete it at replicas 1, reap an orphan's
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "delete"]
# grow the stable's store; reap an orphan's (created by the workers only)
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "patch", "delete"]
# reap an orphan's prefetch Job, and the finished one holding a Terminating store (read from
# the watch-fed cache); never create
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "delete"]
# Events on DecisionModels
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
# the API key it probes the stable with, by name: never list/watch
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end -}}

{{- define "dmrollout.workerRules" -}}
# the live object (uid, spec) by name
- apiGroups: ["decisionmodel.io"]
  resources: ["decisionmodels"]
  verbs: ["get"]
# the rollout's status fields
- apiGroups: ["decisionmodel.io"]
  resources: ["decisionmodels/status"]
  verbs: ["patch"]
# one revision's Pods by label; watch: start and warm-up wake on their changes
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
# the decisionmodel.io/model-ready readiness gate
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
# a revision's Deployment
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "create", "delete"]
# the DecisionModel's Service; patch: promotion
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "create", "patch"]
# a revision's PDB
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "create", "delete"]
# a revision's store; patch: its recovering mark
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "create", "patch", "delete"]
# a revision's prefetch Job; list, watch: the prefetch waits on it (by name)
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
# Events on DecisionModels
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
# API key, download token, golden dataset: by the name a DecisionModel gives, never list/watch
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["get"]
{{- end -}}


{{/* Secure metrics (metrics.secure): the HTTPS /metrics of the controller and the workers. */}}
{{- define "dmrollout.metricsEnv" -}}
- name: DMROLLOUT_METRICS_SECURE
  value: {{ .Values.metrics.secure | quote }}
{{- if .Values.metrics.secure }}
- name: DMROLLOUT_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: DMROLLOUT_METRICS_AUTH_CACHE_TTL_SECONDS
  value: {{ .Values.metrics.authCacheTtlSeconds | quote }}
{{- if .Values.metrics.certSecret }}
- name: DMROLLOUT_METRICS_CERT_DIR
  value: /etc/dmrollout/metrics-tls
{{- end }}
{{- end }}
{{- end -}}

{{- define "dmrollout.httpsPort" -}}
- name: https
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end -}}

{{/* The namespaces dmrollout watches in a namespaced install: watchNamespaces, or the release's. */}}
{{- define "dmrollout.watchNamespaces" -}}
{{- if .Values.rbac.clusterWide -}}
[]
{{- else if .Values.watchNamespaces -}}
{{- .Values.watchNamespaces | toJson -}}
{{- else -}}
{{- list .Release.Namespace | toJson -}}
{{- end -}}
{{- end -}}
