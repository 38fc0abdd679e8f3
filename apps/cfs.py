"""CFS (seed 003): single-path routing; the multipath scheduling happens on the hosts.

The scheme's work is in the end hosts' transport (``dcnlab-mp``, ``hosts/mptransport/``):
one TCP subflow per client interface, each interface address routed like a host of its
own.  The network only has to carry every subflow on its one path, which is what
:mod:`dcnlab.apps.single_path` does; this module gives the scheme an app name of its own
so that ``dcnlab.apps.single_path`` keeps meaning the single_path scheme.
"""

from dcnlab.apps.single_path import SinglePath


class Cfs(SinglePath):
    pass
