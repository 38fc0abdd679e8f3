"""Compatibility shims that must be in place before third-party modules load.

Ryu 4.34's ``ryu/app/wsgi.py`` (imported by ``ryu-manager`` itself) does
``from eventlet.wsgi import ALREADY_HANDLED``, a name eventlet removed in 0.34.
Old eventlet releases that still have it break on Python 3.11, so instead of
pinning one we give ``eventlet.wsgi`` the attribute back the moment it is first
imported.  A ``.pth`` file installed with dcnlab calls :func:`install` at start-up;
the hook is lazy (nothing is imported until someone imports ``eventlet.wsgi``), so
it costs nothing to interpreters that never touch eventlet.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.abc and typing's generics would cost every start-up
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

_TARGET = "eventlet.wsgi"


def _patch(module: ModuleType) -> None:
    if not hasattr(module, "ALREADY_HANDLED"):
        # Ryu only compares identity against this sentinel; any unique object works.
        module.ALREADY_HANDLED = object()  # type: ignore[attr-defined]


class _PatchingLoader:
    """Wraps the real loader (duck-typed: importlib needs only these two methods)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)  # type: ignore[attr-defined]
        _patch(module)


class _EventletWsgiFinder:
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)  # type: ignore[assignment]
                return spec
        return None


def install() -> None:
    """Make ``eventlet.wsgi.ALREADY_HANDLED`` exist whenever eventlet.wsgi is used."""
    module = sys.modules.get(_TARGET)
    if module is not None:
        _patch(module)
        return
    if not any(isinstance(f, _EventletWsgiFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _EventletWsgiFinder())
