"""``dmrollout worker``: the composition root of the workflows and the activities (``run``), and
the interceptor that feeds its liveness (``progress``). The only importer of ``activities``."""
