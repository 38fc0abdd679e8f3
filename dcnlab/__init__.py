"""dcnlab: multipath load balancing and congestion control for data center networks.

The Python code lives in one namespace: ``dcnlab.controller``, ``dcnlab.apps``,
``dcnlab.topo`` and ``dcnlab.benchmarks`` are mapped from the top-level directories
of the same names (see setup.py); ``dcnlab.model``, the model both sides of a run share,
lives in this directory.  Keep this module tiny: a ``.pth`` hook imports
``dcnlab.compat`` at every interpreter start-up in the environment.
"""

__version__ = "0.1.0"
