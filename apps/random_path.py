"""random_path: one shortest path per host pair, drawn at random with a seed.

A baseline between ``single_path`` (every pair's path fixed by address striping) and
ECMP (a path per flow): every (source host, destination host) pair gets one shortest
path chosen at random, the same for all of that pair's flows and stable for a seed, so
two runs with the same seed route identically and another seed draws other paths.

At every switch along the pair's path the app installs an entry matching the pair's
addresses (``ipv4_src``, ``ipv4_dst``) above the ``striped`` routes, which stay as the
fallback for addresses the app does not know yet.  The draw is a walk: from the source's
switch, each hop picks one of its equal-cost next hops towards the destination's switch
(every choice shortens the distance, so the walk is a shortest path and loop-free).  A
link that fails changes the view; the app recompiles and draws again on what is left.

``DCNLAB_RANDOM_PATH_SEED``  the seed (default 1).  Entries: about
pairs x path length / switches per switch (54 on fattree:4), for labs, not for k=48.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from dcnlab.controller.compiler import STRIPED, compile_policy
from dcnlab.controller.fabric_app import FabricApp
from dcnlab.controller.paths import compute_next_hops
from dcnlab.controller.rules import ETH_TYPE_IP, FlowEntry, SwitchRules, match
from dcnlab.controller.view import HostLocation, NetworkView

ENV_SEED = "DCNLAB_RANDOM_PATH_SEED"
PRIO_PAIR = 350  # above the striped prefix routes (<= 300), below host delivery (400)


def draw(seed: int, src: str, dst: str, dpid: int, hops: tuple[int, ...]) -> int:
    """The next hop switch ``dpid`` takes for pair (src, dst): uniform over ``hops`` and
    the same in every process for the same seed (no Python hash randomisation)."""
    digest = hashlib.blake2b(f"{seed}|{src}|{dst}|{dpid}".encode(), digest_size=8).digest()
    return hops[int.from_bytes(digest, "big") % len(hops)]


def pair_paths(view: NetworkView, seed: int) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Per host pair on different switches: its path as (switch, output port) hops."""
    hosts = view.hosts
    hops = compute_next_hops(view, sorted({h.dpid for h in hosts}))
    paths: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for src in hosts:
        for dst in hosts:
            if src.dpid == dst.dpid:
                continue
            path = _walk(view, hops, seed, src, dst)
            if path:
                paths[(src.ip, dst.ip)] = path
    return paths


def _walk(view: NetworkView, hops: Any, seed: int, src: HostLocation,
          dst: HostLocation) -> list[tuple[int, int]]:
    path: list[tuple[int, int]] = []
    here = src.dpid
    while here != dst.dpid:
        choices = hops.of(here, dst.dpid)
        if not choices:
            return []  # unreachable now: the striped routes (or drops) decide
        port = draw(seed, src.ip, dst.ip, here, choices)
        path.append((here, port))
        peer = view.peer(here, port)
        if peer is None:
            return []
        here = peer[0]
    return path


def compile_random_paths(view: NetworkView, seed: int) -> dict[int, SwitchRules]:
    """The striped routes plus one entry per host pair at every switch of its path."""
    rules = compile_policy(view, STRIPED)  # fresh data: ours to add to
    for (src, dst), path in pair_paths(view, seed).items():
        for dpid, port in path:
            rules[dpid].add_flow(FlowEntry(
                PRIO_PAIR, match(eth_type=ETH_TYPE_IP, ipv4_src=src, ipv4_dst=dst),
                (("output", port),)))
    return rules


class RandomPath(FabricApp):
    POLICY = STRIPED  # the fallback under the per-pair entries

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        text = os.environ.get(ENV_SEED, "1")
        try:
            self.seed = int(text)
        except ValueError:
            raise ValueError(f"{ENV_SEED}={text!r}: expected an integer seed") from None

    def compile(self, view: NetworkView) -> dict[int, SwitchRules]:
        return compile_random_paths(view, self.seed)
