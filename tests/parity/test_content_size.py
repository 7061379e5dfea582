"""`_native.content_size` against pydantic's own JSON.

google-adk weighs a request content as `len(content.model_dump_json(
exclude_none=True, fallback=str))`; the core works that length out from the
fields of a content of text parts. On generated contents (any text, quotes,
escapes, control characters, astral characters, thoughts, roles, empty and
missing parts) the two must agree, and anything the core does not size
(other parts, foreign subclasses, invalid UTF-8) must answer None so the
caller serializes it.
"""

from __future__ import annotations

from typing import Any

from adk_fastcompact import _compaction, _native
from google.genai import types
from hypothesis import given
from hypothesis import strategies as st
from pydantic import field_serializer


def pydantic_size(content: Any) -> int:
    if content is None:
        return 0
    return len(content.model_dump_json(exclude_none=True, fallback=str))


# Text with what JSON escapes: quotes, backslashes, every control character,
# DEL, line separators, non-ASCII and astral code points.
texts = st.text(
    alphabet=st.one_of(
        st.sampled_from(['"', "\\", "\x7f", "\u2028", "\u2029", "é", "漢", "🦀"]),
        st.characters(max_codepoint=0x1F),
        st.characters(),
    ),
    max_size=40,
)

text_parts = st.builds(
    types.Part,
    text=st.one_of(st.none(), texts),
    thought=st.one_of(st.none(), st.booleans()),
)


def _content(cls: type[types.Content], role: str | None, parts: list[types.Part] | None) -> Any:
    if cls is types.Content:
        return cls.model_validate({"role": role, "parts": parts})
    # google-genai's subclasses fix the role and want at least one part.
    return cls(parts=parts) if parts else None


contents = st.builds(
    _content,
    st.sampled_from([types.Content, types.UserContent, types.ModelContent]),
    st.one_of(st.none(), st.sampled_from(["model", "user", 'a "role"\n'])),
    st.one_of(st.none(), st.lists(text_parts, max_size=5)),
)


@given(contents)
def test_text_contents_are_sized_as_pydantic_writes_them(content: types.Content) -> None:
    assert _native.content_size(content) == pydantic_size(content)
    assert _compaction._content_size(content) == pydantic_size(content)


def test_none_weighs_nothing() -> None:
    assert _native.content_size(None) == 0


class ShoutedContent(types.Content):
    # Writes its role its own way: not written like Content.
    @field_serializer("role")
    def _shout(self, role: str | None) -> str | None:
        return None if role is None else role.upper() + "!"


def other_contents() -> list[Any]:
    call = types.FunctionCall(name="lookup", args={"q": "x"}, id="c1")
    return [
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        types.Content(
            role="user",
            parts=[types.Part(function_response=types.FunctionResponse(name="f", response={}))],
        ),
        types.Content(role="model", parts=[types.Part(text="a", thought_signature=b"\x00sig")]),
        types.Content(
            role="user", parts=[types.Part(inline_data=types.Blob(data=b"xy", mime_type="a/b"))]
        ),
        ShoutedContent(role="model", parts=[types.Part(text="a", thought=True)]),
        # A lone surrogate is no UTF-8: pydantic's writing decides.
        types.Content(role="model", parts=[types.Part(text="lone \ud800")]),
        "not a content",
    ]


def test_other_contents_are_left_to_pydantic() -> None:
    # The shouting subclass writes another length than Content would.
    shouted = ShoutedContent(role="model", parts=[types.Part(text="a")])
    plain = types.Content(role="model", parts=[types.Part(text="a")])
    assert pydantic_size(shouted) != pydantic_size(plain)
    for content in other_contents():
        assert _native.content_size(content) is None, content
        if isinstance(content, types.Content):
            try:
                expected = pydantic_size(content)
            except ValueError:  # pydantic's own verdict on text it cannot write
                continue
            assert _compaction._content_size(content) == expected
