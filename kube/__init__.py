"""The one door to the Kubernetes API: client wrapper and typed errors (``client``), Secret
reading and capability checks (``secrets``), the readiness gate on Pods (``pod_gate``), rollout
params for the renderers (``params``), and the status writer (``status``, with the rollout's and
the controller's shares in ``rollout_status`` and ``controller_status``). Imports the pure core
(``decisionmodel``) only; shared by the activities and the controller."""
