"""Which classes the Rust core reads like the models it was written for.

The core reads a few fields of each Event straight from the instance
`__dict__` of eight pydantic models (`Event`, `EventActions`,
`EventCompaction`, and google-genai's `Content`, `Part`, `FunctionCall`,
`FunctionResponse`, `GenerateContentResponseUsageMetadata`), where
google-adk's Python reads them as attributes. For an instance of exactly
one of those classes the two reads are the same value. A subclass is read
the same way only when `reads_like` proves that nothing about reading an
instance differs: google-genai's `UserContent` and `ModelContent` (what
streaming responses and `Runner` helpers store) only fix `role` and add an
`__init__`, so they qualify; a class that overrides attribute access,
truthiness, a field or revalidation does not, and the core falls back to
google-adk's own code for it. `docs/content-classes.md` lists every class
that reaches these fields and the reasoning.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The models the core reads, by the name the core knows them by.
MODELS: dict[str, tuple[str, str]] = {
    "event": ("google.adk.events.event", "Event"),
    "actions": ("google.adk.events.event_actions", "EventActions"),
    "compaction": ("google.adk.events.event_actions", "EventCompaction"),
    "content": ("google.genai.types", "Content"),
    "part": ("google.genai.types", "Part"),
    "function_call": ("google.genai.types", "FunctionCall"),
    "function_response": ("google.genai.types", "FunctionResponse"),
    "usage": ("google.genai.types", "GenerateContentResponseUsageMetadata"),
}

#: Modules whose subclasses of a read model are proven at first use (and so
#: never cost a fallback); any other subclass is proven the first time the
#: core meets one (that call falls back, the later ones do not).
LIBRARY_MODULES: tuple[str, ...] = ("google.genai.", "google.adk.")

# What a pydantic model class's own `__dict__` holds besides what its author
# wrote: pydantic's generated machinery, ABC bookkeeping, and what CPython
# adds to every class. None of it changes how an instance's attributes read.
_GENERATED = frozenset(
    {
        "__abstractmethods__",
        "__annotations__",
        "__annotate_func__",
        "__annotations_cache__",
        "__class_vars__",
        "__dict__",
        "__doc__",
        "__firstlineno__",
        "__module__",
        "__orig_bases__",
        "__parameters__",
        "__private_attributes__",
        "__qualname__",
        "__signature__",
        "__static_attributes__",
        "__weakref__",
        "_abc_impl",
        "model_config",
    }
)

# Authored entries that leave reading alone: `__init__` runs before anyone
# reads the instance (google-genai's subclasses only normalize `parts` and
# fix `role` there).
_AUTHORED_HARMLESS = frozenset({"__init__"})

# Configuration that decides how an instance passed to a model field is
# kept: google-adk builds summary Events around the compacted content, and
# the core builds them without validation, which is the same only while
# pydantic keeps instances as they are.
_CONFIG_KEYS = ("revalidate_instances",)


def model(name: str) -> type[Any]:
    """The read model the core calls `name`."""
    module, attr = MODELS[name]
    cls: type[Any] = getattr(importlib.import_module(module), attr)
    return cls


def reads_like(base: type[Any], cls: type[Any]) -> bool:
    """Whether reading an instance of `cls` the way the core reads `base`
    gives what google-adk's attribute reads give.

    True for `base` itself, and for a subclass whose every class up to
    `base` is a pydantic model of the same metaclass that declares the same
    fields as `base` (it may redeclare their defaults, types or frozenness:
    the core checks each value it reads, whatever the declaration), adds
    no class attribute besides pydantic's generated ones and `__init__`
    (no property, method, `__getattr__`, `__bool__`, descriptor or
    validator shadowing a read), and keeps instances as pydantic's default
    does (`revalidate_instances`). Anything it cannot inspect is refused.
    """
    try:
        if cls is base:
            return True
        if not (isinstance(cls, type) and issubclass(cls, base)):
            return False
        if type(cls) is not type(base):
            return False
        if set(cls.__pydantic_fields__) != set(base.__pydantic_fields__):
            return False
        if any(cls.model_config.get(k) != base.model_config.get(k) for k in _CONFIG_KEYS):
            return False
        if cls.__pydantic_computed_fields__ != base.__pydantic_computed_fields__:
            return False
        for klass in cls.__mro__:
            if klass is base:
                return True
            if not issubclass(klass, base):
                # A mixin ahead of `base` in the MRO: its attributes win.
                return False
            for key in vars(klass):
                if key in _GENERATED or key in _AUTHORED_HARMLESS:
                    continue
                if key.startswith("__pydantic_") and key.endswith("__"):
                    continue
                return False
        return False
    except Exception:
        return False


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    found: list[type[Any]] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def library_subclasses(base: type[Any]) -> tuple[type[Any], ...]:
    """The subclasses of `base` that google-genai and google-adk define and
    that read like it (for `Content`: `UserContent`, `ModelContent`)."""
    return tuple(
        sub
        for sub in _subclasses(base)
        if sub.__module__.startswith(LIBRARY_MODULES) and reads_like(base, sub)
    )


def read_models() -> dict[str, tuple[type[Any], tuple[type[Any], ...]]]:
    """Per model the core reads: the class and its library subclasses read
    like it. The core takes this once per interpreter."""
    out = {}
    for name in MODELS:
        base = model(name)
        out[name] = (base, library_subclasses(base))
    return out
