"""The ollaya engine, never seeing the CRD: its params (``params``), the pure renderers
(``render``), model names, sizing and placement, and the only I/O of the core: the registry
resolver and the runtime client (over one shared TLS context, ``http_tls``)."""
