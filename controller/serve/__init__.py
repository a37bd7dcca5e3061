"""What the long-running processes serve and emit: health and liveness, the seed 004 metrics and
the SDK's, the metrics endpoint (HTTPS with authentication), logs and tracing, process memory."""
