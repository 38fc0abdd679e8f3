"""Plug-ins chosen by name with options, ``NAME[/KEY=VALUE]...``: switch_ext's queue
disciplines (``egress=droptail/buffer=100p``) and load balancers (``--select-mode rr``)
share this grammar with the switch (switch_ext/src/spec.rs).  Only characters that
survive the topology spec grammar (no ",") and a shell without quoting."""

from __future__ import annotations

import re
from collections.abc import Mapping

NAMED_SPEC_RE = re.compile(r"[a-z][a-z0-9_-]*(/[a-z][a-z0-9_]*=[A-Za-z0-9._:+%-]+)*")
SYNTAX = "(lower-case name and keys; values of letters, digits and ._:+%-)"


def check_named(text: str, known: Mapping[str, tuple[str, ...]], what: str,
                example: str, hint: str = "") -> None:
    """Nothing if ``text`` is ``NAME[/KEY=VALUE]...`` with a name of ``known`` (name ->
    option keys) and keys it accepts; else ValueError naming ``what`` ("egress
    discipline", "load balancer") and what is wrong.  ``hint`` is added to an unknown
    name's message."""
    if not NAMED_SPEC_RE.fullmatch(text):
        raise ValueError(f"expected NAME[/KEY=VALUE]..., e.g. {example} {SYNTAX}")
    name, *options = text.split("/")
    if name not in known:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(known) or 'none'}{hint}")
    for option in options:
        key = option.partition("=")[0]
        if key not in known[name]:
            raise ValueError(f"{what} {name!r} has no option {key!r}; "
                             f"known: {', '.join(known[name]) or 'none'}")
