"""Decision records that outlive Temporal's retention (issue 38, item 6).

At each promote, rollback and hold decision a rollout writes one record: an in-toto Statement
whose subject is the model's digest and whose predicate says why (the evaluation's decision
record, the policy, the approval, the workflow run, the builds), signed as a DSSE envelope
with the platform team's key. Each record names the previous one of its DecisionModel, so a
record removed from the chain is seen. Pure: building, signing, opening and chaining; where
they are stored is ``kube.decision_records``.
"""
