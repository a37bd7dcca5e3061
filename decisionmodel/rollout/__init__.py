"""What a rollout is made of: the workflow contracts (``contracts``), the revision identity
(``identity``), the one mapping from a DecisionModel to a rollout's inputs (``spec_mapping``) and
from those to the engine's params (``render_params``), the operator settings the steps apply, the
policy check, and the status builders (``step_status``, ``evaluation_status``)."""
