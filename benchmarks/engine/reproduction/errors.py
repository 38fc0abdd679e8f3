"""The errors of reproductions, one base class so the CLI reports them all as usage
errors (exit 2): a bad paper file, or results that lack what a claim needs, are mistakes
to fix before a verdict can exist, not failures of a run."""

from __future__ import annotations


class ReproductionError(ValueError):
    """A paper file or results a reproduction cannot use; the message says what to fix."""


class PaperError(ReproductionError):
    """A bad paper file.  The message starts with the file, then the field's path, with
    the claim's id where there is one: ``p002.yaml: claims[3] (queue-mean).metric: ...``."""

    def __init__(self, path: object, where: str, message: str) -> None:
        self.path = str(path)
        self.where = where
        super().__init__(f"{path}: {where}: {message}" if where else f"{path}: {message}")


class MissingResultsError(ReproductionError):
    """Results without a value a claim needs: the message names the claim and the file
    and column (or the summary entry) that is missing."""
