"""pulsarlab: real Apache Pulsar clusters as code, with proof that nothing acknowledged was lost."""

__version__ = "0.1.0"
