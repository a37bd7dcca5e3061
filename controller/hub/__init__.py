"""The hub's pipeline controller (issue 25)."""
