"""Schemes: one declaration per scheme, found by :mod:`.registry` (see :mod:`.base`).

Each module here declares ``SCHEMES`` and/or ``HOST_PARTS``; packages (``uc3/``,
``tcppath/``) also hold the scheme's controller-side logic, its ``dcnlab check``
invariant and its engine glue.  Its Ryu app stays in ``apps/`` (so ``ryu-manager
apps/<name>.py`` works) and code that runs on end hosts in ``hosts/``.
"""

from . import registry
from .registry import app_module, get, host_part_names, host_parts, lookup, names

__all__ = ["app_module", "get", "host_part_names", "host_parts", "lookup", "names",
           "registry"]
