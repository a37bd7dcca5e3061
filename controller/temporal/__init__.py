"""The controller's Temporal plumbing: connecting (``client``), the optional payload codec and its
codec server, and the rollout lookups and messages (``rollouts``: start, cancel, approve, find)."""
