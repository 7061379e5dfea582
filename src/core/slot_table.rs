//! Slots by object address in 4 bytes a bucket.
//!
//! The index already stores each slot's address, so a table from address
//! to slot need not store the address again: a bucket holds only the slot,
//! and the key of an occupied bucket is read back through `key_of` (the
//! index's own field). Open addressing with linear probing and
//! backward-shift deletion, at most half full. Against a hash map of
//! `(usize, u32)` (16 bytes plus a control byte per bucket, buckets at up
//! to 7/8 load) this holds the same entries in about a quarter of the
//! memory.
//!
//! Every method that reads keys takes `key_of`, which must give the key an
//! entry was inserted under for every slot in the table: callers remove an
//! entry before changing its slot's address, and insert after.

/// A position in the index's store.
pub type Slot = u32;

const EMPTY: u32 = u32::MAX;

/// See the module documentation.
#[derive(Debug, Default, Clone)]
pub struct SlotTable {
    buckets: Vec<u32>,
    len: usize,
}

#[inline]
fn home(key: usize, mask: usize) -> usize {
    // Fibonacci hashing of the address without its alignment bits.
    let h = ((key as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) as usize & mask
}

impl SlotTable {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot whose key is `key`.
    #[inline]
    pub fn find(&self, key: usize, key_of: impl Fn(Slot) -> usize) -> Option<Slot> {
        self.position(key, |s| key_of(s) == key)
            .map(|i| self.buckets[i])
    }

    /// The bucket of the first entry of `key`'s probe sequence that
    /// `matches`, before an empty bucket.
    #[inline]
    fn position(&self, key: usize, matches: impl Fn(Slot) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.buckets.len() - 1;
        let mut i = home(key, mask);
        loop {
            let slot = self.buckets[i];
            if slot == EMPTY {
                return None;
            }
            if matches(slot) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `slot` under `key` (absent: callers remove a previous entry of
    /// the key first).
    pub fn insert(&mut self, key: usize, slot: Slot, key_of: impl Fn(Slot) -> usize) {
        debug_assert!(slot != EMPTY);
        if (self.len + 1) * 2 > self.buckets.len() {
            self.grow(&key_of);
        }
        let mask = self.buckets.len() - 1;
        let mut i = home(key, mask);
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = slot;
        self.len += 1;
    }

    /// Removes every entry, keeping the bucket array.
    pub fn clear(&mut self) {
        self.buckets.fill(EMPTY);
        self.len = 0;
    }

    /// Removes the entry of `slot` under `key`; whether there was one.
    pub fn remove(&mut self, key: usize, slot: Slot, key_of: impl Fn(Slot) -> usize) -> bool {
        let Some(mut i) = self.position(key, |s| s == slot && key_of(s) == key) else {
            return false;
        };
        let mask = self.buckets.len() - 1;
        // Backward shift: move later entries of the cluster into the hole
        // when the hole lies between their home and where they are.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.buckets[j];
            if s == EMPTY {
                break;
            }
            let h = home(key_of(s), mask);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(i) & mask) {
                self.buckets[i] = s;
                i = j;
            }
        }
        self.buckets[i] = EMPTY;
        self.len -= 1;
        true
    }

    fn grow(&mut self, key_of: &impl Fn(Slot) -> usize) {
        let size = (self.buckets.len() * 2).max(16);
        let old = std::mem::replace(&mut self.buckets, vec![EMPTY; size]);
        let mask = size - 1;
        for slot in old.into_iter().filter(|&s| s != EMPTY) {
            let mut i = home(key_of(slot), mask);
            while self.buckets[i] != EMPTY {
                i = (i + 1) & mask;
            }
            self.buckets[i] = slot;
        }
    }

    /// Bytes of the bucket array.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Keys per slot, as the index keeps them beside the table.
    struct Model {
        keys: Vec<usize>,
        table: SlotTable,
        map: HashMap<usize, Slot>,
    }

    impl Model {
        /// Gives `slot` the key `key` (0: none); a slot holding `key`
        /// before loses it, as an address can name one object only.
        fn set(&mut self, slot: Slot, key: usize) {
            let before = self.keys.clone();
            let key_of = |s: Slot| before[s as usize];
            let old = self.keys[slot as usize];
            if old != 0 {
                assert!(self.table.remove(old, slot, key_of));
                self.map.remove(&old);
            }
            self.keys[slot as usize] = 0;
            if key == 0 {
                return;
            }
            if let Some(other) = self.map.remove(&key) {
                assert!(self.table.remove(key, other, key_of));
                self.keys[other as usize] = 0;
            }
            self.keys[slot as usize] = key;
            let keys = &self.keys;
            self.table.insert(key, slot, |s| keys[s as usize]);
            self.map.insert(key, slot);
        }

        fn check(&self) {
            assert_eq!(self.table.len(), self.map.len());
            for (&key, &slot) in &self.map {
                assert_eq!(self.table.find(key, |s| self.keys[s as usize]), Some(slot));
            }
        }
    }

    proptest! {
        #[test]
        fn agrees_with_a_hash_map(ops in prop::collection::vec((0u32..64, 0usize..48), 1..400)) {
            let mut m = Model { keys: vec![0; 64], table: SlotTable::default(), map: HashMap::new() };
            for (slot, key) in ops {
                // Addresses are multiples of 16, as CPython's objects are.
                m.set(slot, key * 16);
                m.check();
            }
            for key in (0..48).map(|k| k * 16 + 1_000_000) {
                prop_assert_eq!(m.table.find(key, |s| m.keys[s as usize]), None);
            }
        }
    }

    #[test]
    fn holds_slots_in_four_bytes_at_most_half_full() {
        let keys: Vec<usize> = (0..1000).map(|k| 0x7f00_0000_0000 + 64 * k).collect();
        let mut table = SlotTable::default();
        for (slot, &key) in keys.iter().enumerate() {
            table.insert(key, slot as Slot, |s| keys[s as usize]);
        }
        assert_eq!(table.len(), 1000);
        assert_eq!(table.memory_bytes(), 2048 * 4);
        for (slot, &key) in keys.iter().enumerate() {
            assert_eq!(table.find(key, |s| keys[s as usize]), Some(slot as Slot));
        }
        for (slot, &key) in keys.iter().enumerate().step_by(2) {
            assert!(table.remove(key, slot as Slot, |s| keys[s as usize]));
        }
        for (slot, &key) in keys.iter().enumerate() {
            let expected = (slot % 2 == 1).then_some(slot as Slot);
            assert_eq!(table.find(key, |s| keys[s as usize]), expected);
        }
    }
}
