"""Rehearsal hosts: machines of their own on this machine, for the playbooks and the faults."""
