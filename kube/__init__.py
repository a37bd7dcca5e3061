"""The one door to the Kubernetes API, and the only importer of ``kubernetes``: the client
wrapper (``client``) whose every call raises the typed errors of ``errors``; one list-then-watch
(``watch``) for the controller's cache and the activities' waits (``wait``); the Lease of leader
election (``lease``); Secret reading and capability checks (``secrets``); the readiness gate on
Pods (``pod_gate``); TokenReview and SubjectAccessReview (``access_review``); and the status
writer (``status``, with the rollout's and the controller's shares in ``rollout_status`` and
``controller_status``). Imports the pure core (``decisionmodel``) only."""
