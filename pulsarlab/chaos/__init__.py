"""Faults: node actions on targets, outages, network cuts, auto-recovery waits.

Importing this package (or any module of it, ``pulsarlab.chaos.actions`` included) registers
every action in :data:`pulsarlab.chaos.actions.ACTIONS`; :mod:`.schedule` is the one scheduler
that runs them on a timetable.
"""

from pulsarlab.chaos import actions, network, nodes, outages, recovery, schedule, topics  # noqa: F401 - each registers its actions
