"""The docker runtime's foundations: the engine (``engine``) and registry-free Pulsar images (``image``)."""
