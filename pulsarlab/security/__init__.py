"""The secure profile's material and how clients use it.

:mod:`pulsarlab.security.material` generates keys, tokens, a CA and the brokers' certificates into
the state directory (it imports the cryptography libraries, so only a secure deployment loads it);
:mod:`pulsarlab.security.files` says where they are; :class:`ClientAuth` is what a client (admin
REST, the Python and Java Pulsar clients, ``client.conf``) needs to talk to a secure cluster: a
token file and the CA to trust.
"""

from pulsarlab.security.client import ClientAuth, client

__all__ = ["ClientAuth", "client"]
