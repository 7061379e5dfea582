"""The `__deepcopy__` that `install()` gives google-adk's Session and Event.

`_native.deep_copy_model` is a builtin function, which a class attribute
does not bind to its instance: `copy.deepcopy(event)` calls
`event.__deepcopy__(memo)`, so the class needs a Python function (bound as
a method) calling it. The native copier recognises this function as its
own: a model whose class has it is copied inline, like one whose class has
pydantic's or google-adk's copier (see docs/session-copy.md). So it must
stay this very object: `install()` gives it google-adk's names in place
(`_patch.carry_names`; its parameters are google-adk's already), and it
keeps them once given.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._native import deep_copy_model as _deep_copy_model

_T = TypeVar("_T")


def deep_copy_model(model: _T, memo: dict[int, Any] | None = None) -> _T:
    """Returns a deep copy of `model`, as google-adk's `deep_copy_model` does.

    Args:
      model: The pydantic model to copy.
      memo: The `copy.deepcopy` memo (copies of shared objects are recorded
        in it, the originals kept alive in the list at `memo[id(memo)]`).

    Returns:
      A deep copy of `model`.
    """
    return _deep_copy_model(model, memo)
