//! Lengths of JSON text, in characters, without writing it.
//!
//! google-adk weighs a request content as `len(content.model_dump_json(
//! exclude_none=True))`: the characters (code points) of its compact JSON.
//! pydantic-core writes that JSON with serde_json's escaping, so the length
//! follows from the values alone: a string literal is its code points, plus
//! two quotes, plus one character for each of `"` and `\` and the five
//! control characters with a short escape (`\b`, `\t`, `\n`, `\f`, `\r`),
//! plus five for each other control character below U+0020 (`\u00XX`).
//! Nothing else is escaped (no `ensure_ascii`, U+2028 and DEL kept as they
//! are). The binding layer differential-tests these lengths against
//! pydantic's own output.

/// Characters of `s` written as a JSON string literal, quotes included.
pub fn string_len(s: &str) -> usize {
    // Counted in blocks short enough for byte counters, which the compiler
    // vectorizes (about ten times faster than one pass of word counters).
    // Code points are the bytes that are not UTF-8 continuation bytes
    // (0b10xxxxxx: below -64 as signed bytes).
    let mut total = 2;
    for block in s.as_bytes().chunks(BLOCK) {
        let (mut continuation, mut control, mut short, mut quoted) = (0u8, 0u8, 0u8, 0u8);
        for &b in block {
            continuation += u8::from((b as i8) < -64);
            control += u8::from(b < 0x20);
            // \b \t \n \f \r: 0x08..=0x0D but for 0x0B.
            short += u8::from(b.wrapping_sub(0x08) < 6 && b != 0x0B);
            quoted += u8::from(b == b'"' || b == b'\\');
        }
        // A control character writes as `\u00XX` (6), one with a short
        // escape as two; `"` and `\` as two.
        total += block.len() - usize::from(continuation) + 5 * usize::from(control)
            - 4 * usize::from(short)
            + usize::from(quoted);
    }
    total
}

/// Bytes counted per block: each count fits a byte.
const BLOCK: usize = 128;

/// Characters of a JSON boolean.
pub fn bool_len(b: bool) -> usize {
    if b {
        4
    } else {
        5
    }
}

/// Characters of a member `"key":value` whose value writes in `value`
/// characters (the key needs no escape: a model field name).
pub fn member_len(key: &str, value: usize) -> usize {
    key.len() + 3 + value
}

/// Characters of a JSON object or array whose `n` members or items write
/// in `inner` characters together: brackets and `n - 1` commas.
pub fn container_len(n: usize, inner: usize) -> usize {
    2 + inner + n.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde_json's own writing, the reference these lengths stand for.
    fn written(s: &str) -> usize {
        serde_json::to_string(s).unwrap().chars().count()
    }

    #[test]
    fn string_len_is_serde_jsons_length_in_code_points() {
        let cases = [
            "",
            "plain",
            "quote \" and backslash \\",
            "\u{8}\t\n\u{c}\r",
            "\u{0}\u{1}\u{1f} control",
            "\u{7f} del, \u{2028} line separator",
            "é ü 漢字 🦀 astral",
            "mixed \"🦀\"\n\u{3}",
        ];
        for s in cases {
            assert_eq!(string_len(s), written(s), "{s:?}");
        }
        for c in (0u32..0x250).chain(0x1F600..0x1F610) {
            let s: String = char::from_u32(c).into_iter().collect();
            assert_eq!(string_len(&s), written(&s), "U+{c:04X}");
        }
    }

    #[test]
    fn containers_count_brackets_and_commas() {
        // {"parts":[{"text":"a"}],"role":"model"}
        let part = container_len(1, member_len("text", string_len("a")));
        let parts = container_len(1, part);
        let content = container_len(
            2,
            member_len("parts", parts) + member_len("role", string_len("model")),
        );
        assert_eq!(content, r#"{"parts":[{"text":"a"}],"role":"model"}"#.len());
        assert_eq!(container_len(0, 0), "{}".len());
        assert_eq!(
            member_len("thought", bool_len(false)),
            r#""thought":false"#.len()
        );
        assert_eq!(bool_len(true), "true".len());
    }

    proptest::proptest! {
        #[test]
        fn string_len_of_any_string(s in proptest::prelude::any::<String>()) {
            proptest::prop_assert_eq!(string_len(&s), written(&s));
        }
    }
}
