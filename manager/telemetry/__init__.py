"""Telemetry every layer may record into: Prometheus metrics (``metrics``) and
OpenTelemetry tracing (``tracing``). It sits below the controllers so that the
controllers, the federation and the worker shim can all record, and it imports
nothing else of kfed except the API constants."""
