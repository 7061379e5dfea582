"""Version gate and reversible patching of every google-adk binding site.

google-adk binds its helpers by name in several modules
(`from ..events._rewind_events import _apply_rewinds`), so replacing the
function in its defining module is not enough: the pure-Python copy keeps
running wherever it was imported by name. `install()` imports every module of
google-adk that is known to bind one of the helpers, then rebinds the name in
every loaded `google.adk` module whose attribute is the original function.
Function-local imports read the defining module at call time and see the
replacement too.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

from . import _families, _native, _reference

#: The google-adk releases whose behaviour family this release reproduces
#: (the releases recorded for each family it has a profile for; a release
#: not listed whose replaced functions are identical is accepted too).
SUPPORTED_ADK_VERSIONS: tuple[str, ...] = tuple(
    version for fam in _families.families() if fam.profile is not None for version in fam.releases
)

#: Modes `install()` accepts.
MODES: tuple[str, ...] = ("parity", "exact")

LOADINGS: tuple[str, ...] = ("full", "lean")
"""What `install(loading=...)` accepts (docs/lean-loading.md)."""


def _parity() -> dict[str, Callable[..., Any]]:
    from . import _compaction, _filtering

    profile = _families.active()
    token = (
        _compaction.run_compaction_for_token_threshold_config
        if profile.scoped
        else _compaction.run_compaction_for_token_threshold_config_unscoped
    )
    if profile.sliding_appends:
        sliding = _compaction.run_compaction_for_sliding_window_appending
    elif profile.skip_token_compaction:
        sliding = _compaction.run_compaction_for_sliding_window_skippable
    else:
        sliding = _compaction.run_compaction_for_sliding_window
    return {
        "apply_rewinds": _filtering.apply_rewinds,
        "get_compaction_ranges": _filtering.get_compaction_ranges,
        "process_compaction_events": (
            _filtering.process_compaction_events
            if profile.attributed
            else _filtering.process_compaction_events_unattributed
        ),
        "recover_compacted_function_calls": _filtering.recover_compacted_function_calls,
        "prompt_chars_saved": _compaction.prompt_chars_saved,
        "run_compaction_for_sliding_window": sliding,
        "run_compaction_for_token_threshold_config": token,
    }


def _exact() -> dict[str, Callable[..., Any]]:
    """What exact mode binds instead; the other names keep parity's."""
    from . import _exact_mode

    return {
        "process_compaction_events": _exact_mode.process_compaction_events,
        "prompt_chars_saved": _exact_mode.prompt_chars_saved,
        "run_compaction_for_sliding_window": _exact_mode.run_compaction_for_sliding_window,
        "run_compaction_for_token_threshold_config": (
            _exact_mode.run_compaction_for_token_threshold_config
        ),
    }


def replacements(mode: str) -> dict[str, Callable[..., Any]]:
    """Our name -> the function `install(mode)` binds in google-adk's place,
    for the replaced functions the installed family has."""
    chosen = {**_parity(), **_exact()} if mode == "exact" else _parity()
    present = _reference.locations()
    return {name: fn for name, fn in chosen.items() if name in present}


def _refusal(found: _families.Recognition, mode: str) -> str | None:
    """Why `install(mode)` must leave the installed google-adk alone, or None."""
    version = found.version
    fam = found.family
    if fam is None:
        return (
            f"google-adk {version} has none of the compaction functions adk-fastcompact"
            " replaces; google-adk was left unchanged"
        )
    if found.changed:
        return (
            f"google-adk {version} changes {', '.join(found.changed)} from the code of the"
            f" {fam.label} family; adk-fastcompact reproduces only recorded code, so"
            " google-adk was left unchanged"
        )
    covered = [f.label for f in reversed(_families.families()) if f.profile is not None]
    if fam.profile is None:
        return (
            f"google-adk {version} belongs to the {fam.label} family, which this release of"
            f" adk-fastcompact leaves to google-adk's own code (it reproduces: "
            f"{'; '.join(covered) or 'none'}); google-adk was left unchanged"
        )
    if mode == "exact" and fam.profile != _families.EXACT_PROFILE:
        return (
            f"exact mode is built on the google-adk {_families.EXACT_PROFILE} family, but"
            f" google-adk {version} belongs to the {fam.label} family: use"
            " install(mode='parity') or upgrade google-adk; google-adk was left unchanged"
        )
    return None


def family() -> dict[str, Any]:
    """The installed google-adk's behaviour family, as `install()` sees it.

    Returns:
      `version` (google-adk's), `family` (a label such as
      "google-adk 2.8.0 to 2.9.2", or None), `releases` (the recorded
      releases of that family), `profile` (the profile this release
      reproduces it with, or None), `changed` (functions whose code differs
      from the family's, `module.name`; empty when recognised) and
      `supported` (whether `install()` accelerates it in parity mode).
    """
    found = _families.recognise()
    fam = found.family
    return {
        "version": found.version,
        "family": None if fam is None else fam.label,
        "releases": () if fam is None else fam.releases,
        "profile": None if fam is None else fam.profile,
        "changed": found.changed,
        "supported": _refusal(found, "parity") is None,
    }


class UnsupportedAdkVersionWarning(RuntimeWarning):
    """`install()` left google-adk untouched because its version is not supported."""


class UnsupportedAdkVersionError(RuntimeError):
    """`install(strict=True)` found a google-adk version it does not support."""


_lock = threading.Lock()
# (module, attribute, original) for every rebinding made, to undo exactly.
_patched: list[tuple[Any, str, Callable[..., Any]]] = []
_mode: str | None = None


def rebind(
    replacements: dict[int, tuple[Callable[..., Any], Callable[..., Any]]],
) -> list[tuple[Any, str, Callable[..., Any]]]:
    """Rebinds functions wherever google-adk holds them.

    Imports every module known to bind a helper by name, then, in every
    loaded `google.adk` module, replaces each attribute that is one of the
    keyed functions (`id(function) -> (function, replacement)`).

    Returns:
      `(module, attribute, function)` per replaced binding, to undo them.
    """
    for name in _reference.binding_modules():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            # A family's binders are those of all its releases: a module
            # (or package) this release does not have binds nothing. A
            # dependency missing inside a module it has still raises.
            missing = error.name or ""
            if not (name == missing or name.startswith(missing + ".")):
                raise
    done: list[tuple[Any, str, Callable[..., Any]]] = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not (
            module_name == "google.adk" or module_name.startswith("google.adk.")
        ):
            continue
        for attr, value in list(vars(module).items()):
            hit = replacements.get(id(value))
            if hit is not None and hit[0] is value:
                setattr(module, attr, hit[1])
                done.append((module, attr, value))
    return done


def as_replaced(new: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """`new` under `original`'s name, qualified name, module and docstring.

    A copy of the function whose code object carries the replaced
    function's name too: CPython names a function in argument errors
    (`_apply_rewinds() got an unexpected keyword argument ...`), tracebacks
    and profiles by its code's `co_qualname` (3.11+) or `co_name`, so a
    wrong call raises the very `TypeError` google-adk raises and a profile
    reads as google-adk's does (with our file and line numbers: the code,
    and so `inspect.getsource`, stays ours). `__module__` is google-adk's,
    as `functools.wraps` would set it: with `__qualname__` it names where
    the object is found (pickle, a span's code namespace); what tells our
    code from google-adk's is the code's file (`_reference.ours`).
    """
    fn = types.FunctionType(
        new.__code__,
        new.__globals__,
        new.__name__,
        new.__defaults__,
        new.__closure__,
    )
    fn.__kwdefaults__ = new.__kwdefaults__
    fn.__annotations__ = dict(new.__annotations__)
    fn.__dict__.update(new.__dict__)
    return carry_names(fn, original)


def carry_names(fn: Any, original: Any) -> Any:
    """Gives the function `fn` itself (not a copy, see `as_replaced`)
    `original`'s name, qualified name, module and docstring, its code's
    names included; returns `fn`. For a hook whose function must stay the
    object it is (`_copy.deep_copy_model`, which the native copier
    recognises by identity) or is made fresh by each install."""
    code = getattr(original, "__code__", None)
    if code is not None:
        names: dict[str, Any] = {"co_name": code.co_name}
        if sys.version_info >= (3, 11):
            names["co_qualname"] = code.co_qualname
        fn.__code__ = fn.__code__.replace(**names)
    fn.__name__ = original.__name__
    fn.__qualname__ = original.__qualname__
    fn.__module__ = original.__module__
    fn.__doc__ = original.__doc__
    return fn


def same_parameters(first: Callable[..., Any], second: Callable[..., Any]) -> bool:
    """Whether two functions take the same parameters (names, kinds and
    defaults; annotations aside), so that a call binds to both alike and a
    wrong one raises the same `TypeError` (under the same names)."""

    def shape(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
        params = inspect.signature(fn, follow_wrapped=False).parameters.values()
        return [(p.name, p.kind, p.default) for p in params]

    return shape(first) == shape(second)


#: `(owner, attribute, what it held before, what install() set)` of every
#: hook `install()` made beyond the rebindings of `_patched` and
#: `_scans.bound` (a class's method, a module's class), while it is made:
#: each hook records itself (`hooked_as`), `unpatch` clears it.
hooked: list[tuple[Any, str, Any, Any]] = []


def hooked_as(owner: Any, attr: str, original: Any, replacement: Any) -> None:
    """Records a hook in `hooked`."""
    hooked.append((owner, attr, original, replacement))


# (mode, our name) -> what install() binds, made once (see `replacement`).
_bound: dict[tuple[str, str], Callable[..., Any]] = {}


def replacement(name: str, mode: str = "parity") -> Callable[..., Any]:
    """What `install(mode)` binds in place of google-adk's function `name`
    (our name, a key of `replacements(mode)`): our function under the replaced
    one's names (`as_replaced`), made at first use and kept, so that every
    install binds the same object and `unpatch` recognises it."""
    key = (mode, name)
    if key not in _bound:
        _bound[key] = as_replaced(replacements(mode)[name], _reference.original(name))
    return _bound[key]


def install(
    mode: str = "parity",
    *,
    strict: bool = False,
    clock_skew: float | None = None,
    loading: str = "full",
) -> bool:
    """Makes google-adk use the Rust implementations.

    Args:
      mode: `"parity"` (decisions identical to the pinned google-adk) or
        `"exact"` (coverage as an interval plus holes: no event lost or
        duplicated; see docs/exact-mode.md).
      strict: Raise instead of warning when google-adk's version is not one
        this release reproduces.
      clock_skew: Exact mode only: seconds another clock (another replica's,
        a timestamp the application sets) may stamp an event behind this
        process's clock. The `EventCompaction` bounds exact mode writes end
        that much below the earliest stamp this process's clock can put on
        a later event, so google-adk without the accelerator does not hide
        such an event (it may show summarized events stamped within the
        margin raw beside their summary). None: 1.0 (docs/exact-mode.md,
        "Clocks other than the writer's"); each call sets it.
      loading: What the Runner's own session loads (`run_async`,
        `run_live`) hold: `"full"`, the whole session (google-adk's), or
        `"lean"`, only the events the turn reads (docs/lean-loading.md).
        Either way a run can ask for a lean load with
        `RunConfig(get_session_config=LeanSessionConfig())`. Each call sets
        it.

    Returns:
      True when the accelerator is active after the call.

    Raises:
      ValueError: `mode` is not one of `MODES`, another mode is installed,
        `clock_skew` is given in parity mode, or is not finite or negative.
      TypeError: `clock_skew` is not a number.
      UnsupportedAdkVersionError: unsupported google-adk version and `strict`.
    """
    global _mode
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES!r}, not {mode!r}")
    if loading not in LOADINGS:
        raise ValueError(f"loading must be one of {LOADINGS!r}, not {loading!r}")
    from . import _underway

    if mode == "exact":
        skew = _underway.checked_clock_skew(clock_skew)
    elif clock_skew is not None:
        raise ValueError("clock_skew applies to exact mode only")
    message = _refusal(_families.recognise(), mode)
    if message is not None:
        if strict:
            raise UnsupportedAdkVersionError(message)
        warnings.warn(message, UnsupportedAdkVersionWarning, stacklevel=2)
        return False
    with _lock:
        if _mode is not None:
            if _mode != mode:
                raise ValueError(f"already installed in mode {_mode!r}; uninstall first")
            if mode == "exact":
                _underway.set_clock_skew(skew)
            _set_loading(loading, mode)
            return True
        originals = {}
        for name in replacements(mode):
            orig = _reference.original(name)
            originals[id(orig)] = (orig, replacement(name, mode))
        _patched.extend(rebind(originals))
        _hook_session_copies()
        _hook_session_loads()
        _hook_scans()
        if mode == "exact":
            _underway.set_clock_skew(skew)
            _undo.append(_underway.hook())
        _hook_lean_loads(mode)
        _set_loading(loading, mode)
        _mode = mode
    return True


def _set_loading(loading: str, mode: str) -> None:
    from . import _lean

    _lean.set_loading(loading, mode)


def _hook_lean_loads(mode: str) -> None:
    """Lets a run load only the events it reads (`_lean`)."""
    from . import _lean

    _undo.append(_lean.hook(mode))
    _undo.append(lambda: _lean.set_loading("full"))


_MISSING = object()


def _hook_session_copies() -> None:
    """Lets deep copies of a session inherit what the index knows of the
    events they were copied from (`_native.index_copied`).

    InMemorySessionService hands every invocation a deep copy of the stored
    session: new Event objects, equal to the stored ones. Without this, the
    index reads every event of the copy again on its first call; with it,
    the copy is bound at copy time, which costs an address-table insertion
    and a reference per event, held until the session copy dies (timed:
    `index_stats()["copy_seconds"]`). The copy's compaction events get the
    summaries of the stored originals (built once per compaction event).

    The copy itself is made by `_native.deep_copy_model` where the session's
    copier is google-adk's own (2.12+), and Event gets it too
    (`_bind_event_copier`); see docs/session-copy.md.
    """
    from google.adk.sessions.session import Session

    own = Session.__dict__.get("__deepcopy__", _MISSING)
    inherited = Session.__deepcopy__
    # google-adk's own copier, replaced by the native one (same result,
    # see docs/session-copy.md); any other (pydantic's on families before
    # 2.12, or one a user set) is kept.
    native = _native_copier(inherited)
    copier = inherited if native is None else native

    # Under the names of the copier it replaces (google-adk's
    # `deep_copy_model(model, memo)`, or pydantic's inherited
    # `BaseModel.__deepcopy__(self, memo)`, which `Session.__deepcopy__`
    # resolved to: there the class gets an attribute of its own, named for
    # what it overrides), with its parameters, so that a wrong call raises
    # the replaced copier's `TypeError`.
    # The in-memory service's lean load copies only the events the turn
    # reads (`_lean.picked`: the session itself unless one is under way).
    from ._lean import picked

    if next(iter(inspect.signature(inherited).parameters)) == "self":

        def __deepcopy__(self: Any, memo: dict[int, Any] | None = None) -> Any:
            source = picked(self)
            copied = copier(source, memo)
            _native.index_copied(
                source.__dict__.get("events"), copied.__dict__.get("events"), copied
            )
            return copied

    else:

        def __deepcopy__(model: Any, memo: dict[int, Any] | None = None) -> Any:  # type: ignore[misc]
            source = picked(model)
            copied = copier(source, memo)
            _native.index_copied(
                source.__dict__.get("events"), copied.__dict__.get("events"), copied
            )
            return copied

    carry_names(__deepcopy__, inherited)
    Session.__deepcopy__ = __deepcopy__  # type: ignore[method-assign,assignment]
    hooked_as(Session, "__deepcopy__", inherited, __deepcopy__)
    undo_event = _bind_event_copier()

    def undo() -> None:
        undo_event()
        if Session.__dict__.get("__deepcopy__") is __deepcopy__:
            if own is _MISSING:
                del Session.__deepcopy__
            else:
                Session.__deepcopy__ = own  # type: ignore[method-assign]

    _undo.append(undo)


#: The module of `DatabaseSessionService`, which imports SQLAlchemy.
DATABASE_MODULE = "google.adk.sessions.database_session_service"


def _hook_session_loads() -> None:
    """Lets the SQL session services answer rows they decoded before from
    the row memo (`_loading`). `DatabaseSessionService` is hooked once its
    module is imported (`_imports.after_import`: now, where the app imported
    it, else when it does), so that an app that never uses it does not
    carry SQLAlchemy's objects through every full collection."""
    from . import _imports, _loading

    undo = _loading.hook_sqlite()
    if undo is not None:
        _undo.append(undo)
    _undo.append(_imports.after_import(DATABASE_MODULE, _hook_database))


def _hook_database(_module: Any) -> None:
    """`DatabaseSessionService`'s hooks: the row memo's and the lean load's
    (`_loading.hook_database`), or where its code is not the shape that
    hooks, the lean load's count of whole loads (`_lean_sql`)."""
    from . import _lean, _lean_sql, _loading

    undo = _loading.hook_database()
    if undo is None:
        undo = _lean.hook_methods(_lean_sql.database_targets())
    _undo.append(undo)


def _hook_scans() -> None:
    """Binds the native drop-ins for google-adk's per-event scans of prompt
    assembly where the installed code is the code they reproduce
    (`_scans`)."""
    from . import _scans

    _undo.append(_scans.bind(rebind))


def _native_copier(copier: Any) -> Callable[..., Any] | None:
    """`_native.deep_copy_model` when `copier` is google-adk's own
    `utils._model_copy.deep_copy_model` (google-adk 2.12+), else None.

    Recognised by identity with the object google-adk defines, never by
    version: a copier someone else set is left to run.
    """
    try:
        from google.adk.utils import _model_copy
    except ImportError:
        return None
    if copier is getattr(_model_copy, "deep_copy_model", _MISSING):
        return _native.deep_copy_model
    return None


def _bind_event_copier() -> Callable[[], None]:
    """Gives `Event` the native copier (`_copy.deep_copy_model`, a Python
    function, so that it binds as a method) when its `__deepcopy__` is
    google-adk's own; returns what undoes it (restoring the original only
    if ours is still there)."""
    from google.adk.events.event import Event

    from . import _copy

    own = Event.__dict__.get("__deepcopy__", _MISSING)
    if _native_copier(own) is None:
        return lambda: None
    # The very function (the native copier knows it by identity), under
    # google-adk's names: `deep_copy_model(model, memo)`, which it replaces.
    carry_names(_copy.deep_copy_model, own)
    Event.__deepcopy__ = _copy.deep_copy_model  # type: ignore[method-assign,assignment]
    hooked_as(Event, "__deepcopy__", own, _copy.deep_copy_model)

    def undo() -> None:
        if Event.__dict__.get("__deepcopy__") is _copy.deep_copy_model:
            Event.__deepcopy__ = own  # type: ignore[method-assign]

    return undo


_undo: list[Callable[[], None]] = []


def uninstall() -> None:
    """Restores every google-adk binding `install()` replaced and drops the
    per-session indexes (`index_stats()` shows them). Idempotent."""
    unpatch()
    _native.index_clear()


def unpatch() -> None:
    """`uninstall()` keeping the per-session indexes (for the benchmark,
    which switches google-adk back and forth between turns)."""
    global _mode
    with _lock:
        while _undo:
            _undo.pop()()
        hooked.clear()
        replacements = {id(new) for new in _bound.values()}
        while _patched:
            module, attr, original = _patched.pop()
            # Only undo what is still ours; a later patch by someone else stays.
            if id(getattr(module, attr, None)) in replacements:
                setattr(module, attr, original)
        _mode = None


def installed() -> str | None:
    """The active mode, or None when google-adk runs its own code."""
    return _mode
