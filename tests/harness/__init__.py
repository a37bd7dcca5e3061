"""The shared test harness: waits instead of sleeps (``helpers``), the rollout environment of
the e2e tests (``rollout_harness``), the fake API server (``fake_api_server``), the shipped
manifests and chart renders (``shipped``), the payload codec's environment (``codec_env``),
metrics identities, and the per-worker run summaries (``run_summaries``)."""
