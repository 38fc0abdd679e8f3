"""What the network lifecycle raises and warns, in a module of its own.

Every part of the lifecycle (preflight, run namespace, controller process, readiness,
teardown) reports through these two, and :mod:`.ext_switch` warns with the second; a
leaf module keeps those imports one-way.  :mod:`.network` re-exports both.
"""


class NetworkError(RuntimeError):
    """The network could not be started, queried or stopped; the message says why."""


class EmulationWarning(UserWarning):
    """Link parameters that the chosen switch kind cannot emulate are ignored."""
