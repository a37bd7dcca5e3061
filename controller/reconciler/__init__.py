"""The reconciler: watches feed a cache, a work queue feeds one reconcile per DecisionModel, which
decides which rollout should run (``reconcile``, ``dispatch``), starts or cancels it through
``controller.temporal``, and looks after the stable revision with Kubernetes alone (``steady``,
``store_recovery``, ``reaper``), under a leader Lease (``leader``, ``manager``)."""
