"""Find every scheme and host-parts declaration in :mod:`dcnlab.schemes`.

Each module (or package) directly under ``dcnlab/schemes/`` may define ``SCHEMES`` (a
sequence of :class:`~dcnlab.schemes.base.Scheme`) and ``HOST_PARTS`` (a sequence of
:class:`~dcnlab.schemes.base.HostParts`).  Adding a scheme is adding such a module: no
list to edit here.  Names must be unique; a clash is an error at start-up, not a silent
override.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from dataclasses import dataclass

from .base import HostParts, Scheme

PACKAGE = "dcnlab.schemes"
_NOT_DECLARATIONS = {"base", "registry"}


class UnknownSchemeError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Registry:
    schemes: dict[str, Scheme]
    host_parts: dict[str, HostParts]


@functools.cache
def registry() -> Registry:
    pkg = importlib.import_module(PACKAGE)
    schemes: dict[str, Scheme] = {}
    parts: dict[str, HostParts] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name in _NOT_DECLARATIONS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for scheme in getattr(module, "SCHEMES", ()):
            if scheme.name in schemes:
                raise ValueError(f"scheme {scheme.name!r} is declared twice "
                                 f"({module.__name__} and another module)")
            schemes[scheme.name] = scheme
        for part in getattr(module, "HOST_PARTS", ()):
            if part.name in parts:
                raise ValueError(f"host parts {part.name!r} are declared twice")
            parts[part.name] = part
    for scheme in schemes.values():
        if scheme.host_parts is not None and scheme.host_parts not in parts:
            raise ValueError(f"scheme {scheme.name!r} needs host parts "
                             f"{scheme.host_parts!r}, which nothing declares")
    return Registry(schemes, parts)


def names() -> list[str]:
    return list(registry().schemes)


def get(name: str) -> Scheme:
    try:
        return registry().schemes[name]
    except KeyError:
        raise UnknownSchemeError(f"unknown scheme {name!r}; known: {', '.join(names())} "
                                 "(or give a Ryu app module or file)") from None


def is_app_path(text: str) -> bool:
    """A dotted module name or a file path rather than a short scheme name."""
    return "." in text or os.sep in text or "/" in text


def lookup(app: str) -> Scheme | None:
    """The scheme behind ``app``: a short name, the app's module (``dcnlab.apps.ecmp``)
    or the app's file in a checkout (``apps/ecmp.py``).  None for apps of no scheme."""
    if not is_app_path(app):
        return get(app)
    module = app.removesuffix(".py").replace(os.sep, ".").replace("/", ".")
    tail = module.split(".")[-2:]  # "apps/uc3.py" and "dcnlab.apps.uc3" alike
    for scheme in registry().schemes.values():
        if scheme.app == module or scheme.app.split(".")[-2:] == tail:
            return scheme
    return None


def app_module(app: str) -> str:
    """``ecmp`` -> ``dcnlab.apps.ecmp``; module names and file paths pass through."""
    return app if is_app_path(app) else get(app).app


def host_parts(name: str) -> HostParts:
    try:
        return registry().host_parts[name]
    except KeyError:
        known = ", ".join(registry().host_parts) or "none"
        raise UnknownSchemeError(f"unknown host parts {name!r}; known: {known}") from None


def host_part_names() -> list[str]:
    return list(registry().host_parts)
