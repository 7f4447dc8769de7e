"""The errors of model files: :class:`ModelFileError` for callers, :class:`FileProblem` inside."""

from __future__ import annotations

from typing import Any, NoReturn


class ModelFileError(ValueError):
    """A file cannot be loaded as a tabsparse model (corrupt, truncated, edited, foreign or unsafe).

    Parameters
    ----------
    path : str
        The file that was being loaded.
    problem : str
        What is wrong with it.

    Attributes
    ----------
    path : str
    problem : str
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"cannot load {path!r} as a tabsparse model: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.problem))


class FileProblem(Exception):
    """A problem found in a model file while reading it.

    Raised by the readers (and by the estimator layer's checks of a payload);
    :func:`tabsparse.io.load` turns it into a :class:`ModelFileError` naming the file.
    """


def bad(problem: str) -> NoReturn:
    """Raise :class:`FileProblem` with ``problem``."""
    raise FileProblem(problem)
