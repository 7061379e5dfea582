//! Version-4 UUID text from random bytes.

/// The canonical text of the version-4 UUID made from 16 random bytes, as
/// Python's `str(uuid.UUID(bytes=b, version=4))` (and so `uuid.uuid4()`,
/// which takes `os.urandom(16)`) writes it.
pub fn uuid4_text(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::uuid4_text;

    #[test]
    fn writes_what_python_writes() {
        // str(uuid.UUID(bytes=bytes(range(16)), version=4)) and of 16 x 0xff.
        let counting: [u8; 16] = std::array::from_fn(|i| i as u8);
        assert_eq!(uuid4_text(counting), "00010203-0405-4607-8809-0a0b0c0d0e0f");
        assert_eq!(
            uuid4_text([0xff; 16]),
            "ffffffff-ffff-4fff-bfff-ffffffffffff"
        );
        assert_eq!(uuid4_text([0; 16]), "00000000-0000-4000-8000-000000000000");
    }
}
