"""The OpenTelemetry adapter: the services' ``Telemetry`` protocol over the OpenTelemetry SDK,
and the Azure Monitor distro's one-time configuration (``monitor.py``)."""
