"""Faults: node actions on targets, outages, network cuts, auto-recovery waits.

Importing this package (or any module of it, ``pulsarlab.chaos.schedule`` included) registers
every action in :data:`pulsarlab.chaos.schedule.ACTIONS`.
"""

from pulsarlab.chaos import network, nodes, outages, recovery, schedule, topics  # noqa: F401 - each registers its actions
