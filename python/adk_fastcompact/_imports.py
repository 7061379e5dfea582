"""Hooks that wait for a module to be imported.

`install()` hooks `DatabaseSessionService`, whose module imports
SQLAlchemy and its ORM: some 50,000 garbage-collected objects (functions,
classes, tuples) that every full collection walks from then on, in an app
that never uses that service (the in-memory and SQLite services need no
SQLAlchemy). So where the module is not imported yet, its hook waits for
the application to import it (`after_import`), and runs right after the
module's own code, before the import statement returns.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the hook."""

    def __init__(self, loader: Any, finder: _Finder) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        module: ModuleType | None = create(spec) if create is not None else None
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # The module is whole here, as `import` hands it back.
        self._finder.fire(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_filename, is_package...: the module's own loader's.
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of `name`'s spec, as the
    other finders find it, so that `callback` runs once it is loaded."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self._callback: Callable[[ModuleType], None] | None = callback
        self._looking = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or getattr(self._looking, "busy", False):
            return None
        self._looking.busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._looking.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, self)
        return spec

    def fire(self, module: ModuleType) -> None:
        callback, self._callback = self._callback, None
        self.remove()
        if callback is None:
            return
        try:
            callback(module)
        except Exception:  # a hook of ours must not fail the app's import
            logger.warning("adk_fastcompact: hooking %s failed", self.name, exc_info=True)

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def after_import(name: str, callback: Callable[[ModuleType], None]) -> Callable[[], None]:
    """Runs `callback(module)` once module `name` is imported: now, where it
    is, else right after its code runs. Returns what cancels a callback not
    run yet."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return lambda: None
    finder = _Finder(name, callback)
    sys.meta_path.insert(0, finder)

    def cancel() -> None:
        finder._callback = None
        finder.remove()

    return cancel
