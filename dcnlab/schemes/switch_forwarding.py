"""switch_forwarding: the controller installs nothing; the switches forward by themselves.

For switch kinds with forwarding of their own, such as the TCP-Path authors' switch
(an ofsoftswitch13 fork whose datapath runs ARP-Path, TCP-Path or TFE on a table miss;
``python -m dcnlab.benchmarks.authors_switch``): the experiment engine, its flow lists and
its measurements stay dcnlab's, the forwarding is the switch's.
"""

from .base import Scheme

SCHEMES = [
    Scheme(
        name="switch_forwarding",
        app="dcnlab.apps.switch_forwarding",
        summary="no entries from the controller: the switches' own forwarding carries "
                "everything (switch kinds that forward by themselves, e.g. the TCP-Path "
                "authors' switch built by dcnlab.benchmarks.authors_switch)",
        requires_forwarding_switch=True,
    ),
]
