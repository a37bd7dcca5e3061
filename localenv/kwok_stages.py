"""The Pod stages kwok plays in the local cluster.

kwok's default ``pod-ready`` stage marks every readiness gate True and the Pod Ready at once,
which would make dmrollout's model-ready gate meaningless. These stages differ from kwok's
``fast`` set (v0.8.0, kustomize/stage/pod/fast) in two ways:

- ``pod-ready`` leaves readiness gates alone and sets ``Ready`` only for Pods without gates;
  for gated Pods the fake kubelet (``localenv.kubelet``) computes Ready = ContainersReady and
  every gate True, as the real kubelet's status manager does.
- Pods of Jobs are not moved by kwok at all: the fake kubelet runs them (the prefetch Job pulls
  from the registry simulator and checks the digest) and writes their exit code and
  termination message, so a Job ends the way the real one would.

Node stages are kwok's own ``node-initialize`` (fast) and ``node-heartbeat-with-lease``,
copied unchanged from kwok v0.8.0 (Apache-2.0): with a config file kwok loads no default stages.
"""

from __future__ import annotations

JOB_POD_LABEL = "batch.kubernetes.io/job-name"

POD_STAGES = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.labels["{JOB_POD_LABEL}"]'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: ContainersReady
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: PodScheduled
      {{{{ if not .spec.readinessGates }}}}
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Ready
      {{{{ else }}}}
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        reason: ReadinessGatesNotReady
        type: Ready
      {{{{ end }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      {{{{ $hostIPs := NodeIPsWith .spec.nodeName }}}}
      {{{{ with $hostIPs }}}}
      hostIP: {{{{ index . 0 | Quote }}}}
      hostIPs:
      {{{{ range . }}}}
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ end }}}}
      {{{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}}}
      {{{{ with $podIPs }}}}
      podIP: {{{{ index . 0 | Quote }}}}
      podIPs:
      {{{{ range . }}}}
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""

# Copied unchanged from kwok v0.8.0 kustomize/stage/node/{fast,heartbeat-with-lease}.
NODE_STAGES = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type  | Quote}}
      {{ end }}

      {{ $hasInternalIP := false }}
      {{ $hasHostname := false }}
      {{ range .status.addresses }}
        {{ if eq .type "InternalIP" }}
          {{ $hasInternalIP = true }}
        {{ end }}
        {{ if eq .type "Hostname" }}
          {{ $hasHostname = true }}
        {{ end }}
      {{ end }}
      {{ if or (not $hasInternalIP) (not $hasHostname) }}
      addresses:
      {{ end }}
      {{ if not $hasInternalIP }}
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ end }}
      {{ if not $hasHostname }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
      {{ end }}

      {{ with NodePort }}
      daemonEndpoints:
        kubeletEndpoint:
          Port: {{ . }}
      {{ end }}

      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{ end }}

      {{ $nodeInfo := .status.nodeInfo }}
      {{ $kwokVersion := printf "kwok-%s" Version }}
      nodeInfo:
        architecture: {{ or $nodeInfo.architecture "amd64" }}
        bootID: {{ or $nodeInfo.bootID `""` }}
        containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion $kwokVersion }}
        kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}
        kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}
        kubeletVersion: {{ or $nodeInfo.kubeletVersion $kwokVersion }}
        machineID: {{ or $nodeInfo.machineID `""` }}
        operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
        osImage: {{ or $nodeInfo.osImage `""` }}
        systemUUID: {{ or $nodeInfo.systemUUID `""` }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat-with-lease
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values:
      - 'True'
  delay:
    durationMilliseconds: 600000
    jitterDurationMilliseconds: 610000
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}

      addresses:
      {{ with .status.addresses }}
      {{ YAML . 1 }}
      {{ else }}
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
      {{ end }}

      {{ with NodePort }}
      daemonEndpoints:
        kubeletEndpoint:
          Port: {{ . }}
      {{ end }}
"""
