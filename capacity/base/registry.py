"""One registry mechanism for everything named: memories, feature maps, key families, tasks and studies.

A ``Registry`` holds the package's own entries, in the order they were added (the order of ``capacity list`` and of
figure legends), and finds the rest where a user's package declares them: its entry point group
(``lacapacity.variants``, ``lacapacity.features``, ``lacapacity.keys``, ``lacapacity.tasks``, ``lacapacity.studies``) and,
where the kind allows it, an import path ``module:attr``. A name it cannot find is one line listing what it knows; a
plug-in of the wrong type is one line naming it. The torch-free catalog that ``capacity list`` prints
(``lacapacity.base.catalog``) is written from these registries.

>>> reg = Registry("lacapacity.keys", "key family", path="module:attr")
>>> reg.add("gaussian", 1)
>>> reg.get("gaussian"), reg.find("nothing-here")
(1, None)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from lacapacity.base import plugins
from lacapacity.errors import CapacityError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> entries of one kind: the package's own (``add``), then plug-ins.

    ``group``: the entry point group plug-in packages declare in; ``what``: the kind, for messages (``"key family"``);
    ``path``: how an import path of this kind is written in messages (``"module:Class"``), None where a name cannot be
    one; ``accept``: turns a loaded plug-in into an entry (or raises a one-line CapacityError saying what it must be),
    default: taken as it is."""

    def __init__(
        self, group: str, what: str, *, path: str | None, accept: Callable[[str, object], T] | None = None
    ) -> None:
        if group not in plugins.GROUPS:
            raise CapacityError(f"unknown entry point group {group!r}; known: {', '.join(plugins.GROUPS)}")
        self.group, self.what, self.path = group, what, path
        self._accept = accept
        self._own: dict[str, T] = {}
        self._loaded: dict[str, T] = {}

    def add(self, name: str, entry: T) -> None:
        """Make ``name`` the package's (or a session's) own entry; adding a name again replaces it."""
        if not isinstance(name, str) or not name:
            raise CapacityError(f"a {self.what} name must be a non-empty string, got {name!r}")
        self._own[name] = entry
        self._loaded.pop(name, None)

    def remove(self, name: str) -> None:
        """Forget the own entry ``name`` (a test's or a session's; a plug-in stays declared)."""
        self._own.pop(name, None)
        self._loaded.pop(name, None)

    def copy(self) -> Registry[T]:
        """A registry of the same kind with the same entries (to change one without touching this one)."""
        out: Registry[T] = Registry(self.group, self.what, path=self.path, accept=self._accept)
        out._own, out._loaded = dict(self._own), dict(self._loaded)
        return out

    def own(self) -> dict[str, T]:
        """The entries added here, in the order they were added."""
        return dict(self._own)

    def __contains__(self, name: object) -> bool:
        return name in self._own

    def __iter__(self) -> Iterator[str]:
        return iter(self._own)

    def declared(self) -> dict[str, str]:
        """The plug-ins installed packages declare (entry points not shadowed by an own entry): name -> ``module:attr``."""
        return {n: v for n, v in sorted(plugins.entry_points(self.group).items()) if n not in self._own}

    def names(self) -> list[str]:
        """Every name known without importing anything: the own entries in order, then the declared plug-ins."""
        return [*self._own, *self.declared()]

    def find(self, name: str) -> T | None:
        """The entry ``name``: an own one, an import path (where allowed) or a declared plug-in, loaded and accepted;
        None when nothing has that name. A plug-in that cannot be loaded or is of the wrong kind is one line."""
        if name in self._own:
            return self._own[name]
        if name in self._loaded:
            return self._loaded[name]
        is_path = bool(self.path) and ":" in name
        if is_path:
            found = plugins.load_path(name)
        else:
            found = plugins.entry_point(self.group, name)
            if found is None:
                return None
        entry = self._accept(name, found) if self._accept is not None else found
        if not is_path:  # entry points are fixed for the session; import paths are re-read
            self._loaded[name] = entry
        return entry

    def get(self, name: str) -> T:
        """``find(name)``, or one line listing the names known."""
        found = self.find(name) if isinstance(name, str) else None
        if found is None:
            raise self.unknown(name)
        return found

    def unknown(self, name: object) -> CapacityError:
        """The error for a name nothing has: the names known, sorted."""
        path = f", or an import path {self.path}" if self.path else ""
        return CapacityError(f"unknown {self.what} {name!r}; known: {', '.join(sorted(self.names()))}{path}")

    def loaded(self) -> dict[str, T]:
        """Every entry, the plug-ins loaded (one that cannot be is left out with a one-line warning)."""
        out = dict(self._own)
        for name in self.declared():
            try:
                out[name] = self.get(name)
            except CapacityError as exc:  # one broken plug-in does not hide the others
                plugins.skip(exc)
        return out
