"""The neutral model that the controller side and the network side share.

``dcnlab.controller`` (and the apps) run inside ``ryu-manager``; ``dcnlab.topo`` builds
the network and launches that process.  They meet in two places only, and both live
here so that neither side imports the other:

- :mod:`.topology`: the topology model (switches, hosts, interfaces, links and their
  parameters), the JSON handed to the app through ``DCNLAB_TOPOLOGY``;
- :mod:`.runtime`: the run-time contract, i.e. the ``DCNLAB_*`` environment variables an
  app reads and the state file it writes (``DCNLAB_STATE_FILE``) with its declared schema.

Nothing here imports Ryu, Mininet or either side.
"""
