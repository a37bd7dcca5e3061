"""Pipelines across clusters (issue 25): the pure rules a pipeline run follows, no I/O."""
