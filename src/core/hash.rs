//! A small multiply-rotate hasher for the integer keys the core hashes
//! (symbols, object identities). std's SipHash resists hash flooding, which
//! does not matter for keys we assign ourselves, and costs several times more.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hasher: one rotate, xor and multiply per word.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // A product's low bits depend only on the input's low bits, and
        // hashbrown picks buckets by the low bits: without this rotation,
        // 16-byte-aligned object addresses would all share a few buckets.
        self.0.rotate_left(26)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(SEED);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// `HashSet` with [`FastHasher`].
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_addresses_spread_over_low_bits() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let buckets: FastSet<u64> = (0..1024u64)
            .map(|i| build.hash_one(0x7f00_0000_0000 + i * 16) & 1023)
            .collect();
        // Without the final rotation every hash shares its low 4 bits.
        assert!(
            buckets.len() > 512,
            "only {} distinct buckets",
            buckets.len()
        );
    }
}
