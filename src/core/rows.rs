//! What a session service's stored rows decoded to, remembered across loads.
//!
//! A session service decodes every stored event row on every load, although
//! a long session's rows rarely change between turns. [`RowMemo`] keys what a
//! row decoded to on the row's exact bytes. It trusts a decoding only once it
//! is shown deterministic: the first sighting of a row keeps a private copy
//! of its decoding ([`Slot::Seen`]); the second decodes again and the caller
//! compares the two ([`RowMemo::settle`]). Equal, the row is settled and later
//! loads are answered from the memo (by a copy the caller makes); different
//! (a decoder that stamps a fresh id or the clock into what the row left
//! out), the row is never answered from the memo.
//!
//! The memo holds at most `budget` bytes of row keys; past it, the rows used
//! longest ago go first (down to three quarters of the budget, so a full memo
//! does not evict on every insertion).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::hash::FastHasher;

/// A decoding's state in the memo.
#[derive(Debug)]
pub enum Slot<V> {
    /// Decoded once; `V` is a private copy of that decoding.
    Seen(V),
    /// Decoded twice to equal results; answers from the memo.
    Settled(V),
    /// Decoded twice to different results; always decoded by the caller.
    Unsettled,
}

impl<V> Slot<V> {
    fn into_value(self) -> Option<V> {
        match self {
            Slot::Seen(v) | Slot::Settled(v) => Some(v),
            Slot::Unsettled => None,
        }
    }
}

#[derive(Debug)]
struct Entry<V> {
    slot: Slot<V>,
    used: u64,
}

/// What the memo answered, since it was made or cleared.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RowCounters {
    /// Rows answered from a settled decoding.
    pub hits: u64,
    /// Rows decoded for the first time (or again after an eviction).
    pub first: u64,
    /// Rows decoded a second time, to settle them.
    pub second: u64,
    /// Rows whose two decodings differed (decoded on every load).
    pub unsettled: u64,
    /// Rows evicted to keep within the budget.
    pub evicted: u64,
}

/// The memo of row decodings; `V` is the caller's decoded object.
#[derive(Debug)]
pub struct RowMemo<V> {
    map: HashMap<Box<[u8]>, Entry<V>, BuildHasherDefault<FastHasher>>,
    bytes: usize,
    budget: usize,
    clock: u64,
    counters: RowCounters,
}

/// What the caller does with a row, as [`RowMemo::lookup`] says.
#[derive(Debug)]
pub enum Lookup<'a, V> {
    /// Copy this settled decoding.
    Copy(&'a V),
    /// Decode the row and [`RowMemo::first`] a copy of it.
    First,
    /// Decode the row and [`RowMemo::settle`] with whether it equals this.
    Second(&'a V),
    /// Decode the row; nothing to remember.
    Decode,
}

/// The default budget: 256 MiB of row bytes.
pub const DEFAULT_BUDGET: usize = 256 << 20;

impl<V> Default for RowMemo<V> {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET)
    }
}

impl<V> RowMemo<V> {
    /// An empty memo keeping at most `budget` bytes of row keys.
    pub const fn new(budget: usize) -> Self {
        Self {
            map: HashMap::with_hasher(BuildHasherDefault::new()),
            bytes: 0,
            budget,
            clock: 0,
            counters: RowCounters {
                hits: 0,
                first: 0,
                second: 0,
                unsettled: 0,
                evicted: 0,
            },
        }
    }

    /// What to do with `row`; marks it used.
    pub fn lookup(&mut self, row: &[u8]) -> Lookup<'_, V> {
        if self.budget == 0 {
            return Lookup::Decode;
        }
        self.clock += 1;
        let clock = self.clock;
        match self.map.get_mut(row) {
            None => Lookup::First,
            Some(entry) => {
                entry.used = clock;
                match &entry.slot {
                    Slot::Settled(v) => {
                        self.counters.hits += 1;
                        Lookup::Copy(v)
                    }
                    Slot::Seen(v) => Lookup::Second(v),
                    Slot::Unsettled => Lookup::Decode,
                }
            }
        }
    }

    /// Remembers a private copy of `row`'s first decoding. Returns what
    /// leaves the memo to keep within the budget (for the caller to drop
    /// once it lets go of the memo).
    pub fn first(&mut self, row: &[u8], copy: V) -> Vec<V> {
        if self.budget == 0 || row.len() > self.budget {
            return vec![copy];
        }
        self.counters.first += 1;
        self.clock += 1;
        let entry = Entry {
            slot: Slot::Seen(copy),
            used: self.clock,
        };
        let mut gone = Vec::new();
        match self.map.insert(row.into(), entry) {
            None => self.bytes += row.len(),
            Some(old) => gone.extend(old.slot.into_value()),
        }
        if self.bytes > self.budget {
            gone.extend(self.shrink(self.budget / 4 * 3));
        }
        gone
    }

    /// Settles `row` after its second decoding: `same` when it equals the
    /// first (a settled row keeps the first decoding's copy). Returns what
    /// leaves the memo, for the caller to drop.
    pub fn settle(&mut self, row: &[u8], same: bool) -> Option<V> {
        let entry = self.map.get_mut(row)?;
        let slot = std::mem::replace(&mut entry.slot, Slot::Unsettled);
        match slot {
            Slot::Seen(v) if same => {
                self.counters.second += 1;
                entry.slot = Slot::Settled(v);
                None
            }
            Slot::Seen(v) => {
                self.counters.second += 1;
                self.counters.unsettled += 1;
                Some(v)
            }
            other => {
                entry.slot = other;
                None
            }
        }
    }

    /// Drops the rows used longest ago until at most `target` bytes remain.
    fn shrink(&mut self, target: usize) -> Vec<V> {
        let mut by_age: Vec<(u64, usize)> =
            self.map.iter().map(|(k, e)| (e.used, k.len())).collect();
        by_age.sort_unstable();
        let mut bytes = self.bytes;
        let mut cutoff = 0;
        for (used, len) in by_age {
            if bytes <= target {
                break;
            }
            bytes -= len;
            cutoff = used;
        }
        let mut gone = Vec::new();
        let mut evicted = 0;
        self.map.retain(|_, e| {
            let keep = e.used > cutoff;
            if !keep {
                evicted += 1;
                let slot = std::mem::replace(&mut e.slot, Slot::Unsettled);
                gone.extend(slot.into_value());
            }
            keep
        });
        self.counters.evicted += evicted;
        self.bytes = self.map.keys().map(|k| k.len()).sum();
        gone
    }

    /// Sets the budget (0 turns the memo off) and keeps within it.
    /// Returns what leaves the memo, for the caller to drop.
    pub fn set_budget(&mut self, budget: usize) -> Vec<V> {
        self.budget = budget;
        if self.bytes > budget {
            self.shrink(budget)
        } else {
            Vec::new()
        }
    }

    /// Forgets every row and the counters; returns what leaves the memo.
    pub fn clear(&mut self) -> Vec<V> {
        self.bytes = 0;
        self.counters = RowCounters::default();
        self.map
            .drain()
            .filter_map(|(_, e)| e.slot.into_value())
            .collect()
    }

    /// The budget in bytes of row keys.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Rows remembered (in any state).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no row is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of row keys remembered.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Rows settled (answered from the memo).
    pub fn settled(&self) -> usize {
        self.map
            .values()
            .filter(|e| matches!(e.slot, Slot::Settled(_)))
            .count()
    }

    /// What the memo answered.
    pub fn counters(&self) -> RowCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind<V>(l: &Lookup<'_, V>) -> &'static str {
        match l {
            Lookup::Copy(_) => "copy",
            Lookup::First => "first",
            Lookup::Second(_) => "second",
            Lookup::Decode => "decode",
        }
    }

    #[test]
    fn a_row_is_answered_only_after_two_equal_decodings() {
        let mut m = RowMemo::new(1000);
        assert_eq!(kind(&m.lookup(b"row")), "first");
        m.first(b"row", 1);
        assert_eq!(kind(&m.lookup(b"row")), "second");
        m.settle(b"row", true);
        match m.lookup(b"row") {
            Lookup::Copy(v) => assert_eq!(*v, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(m.counters().hits, 1);
        assert_eq!(m.settled(), 1);
    }

    #[test]
    fn a_row_decoding_differently_is_always_decoded() {
        let mut m = RowMemo::new(1000);
        m.lookup(b"r");
        m.first(b"r", 1);
        m.lookup(b"r");
        m.settle(b"r", false);
        for _ in 0..3 {
            assert_eq!(kind(&m.lookup(b"r")), "decode");
        }
        assert_eq!(m.counters().unsettled, 1);
        assert_eq!(m.counters().hits, 0);
    }

    #[test]
    fn rows_differing_in_one_byte_are_different_rows() {
        let mut m = RowMemo::new(1000);
        m.first(b"{\"a\":1}", 1);
        assert_eq!(kind(&m.lookup(b"{\"a\":2}")), "first");
    }

    #[test]
    fn the_rows_used_longest_ago_go_first() {
        let mut m = RowMemo::new(40);
        for i in 0..4u8 {
            let row = [i; 10];
            m.lookup(&row);
            m.first(&row, i);
        }
        assert_eq!(m.bytes(), 40);
        // Row 0 used again: row 1 is now the oldest.
        m.lookup(&[0; 10]);
        m.first(&[9; 10], 9);
        assert!(m.bytes() <= 30, "{}", m.bytes());
        assert_eq!(kind(&m.lookup(&[0; 10])), "second");
        assert_eq!(kind(&m.lookup(&[1; 10])), "first");
        assert!(m.counters().evicted >= 1);
    }

    #[test]
    fn a_zero_budget_remembers_nothing() {
        let mut m = RowMemo::new(0);
        assert_eq!(kind(&m.lookup(b"x")), "decode");
        m.first(b"x", 1);
        assert!(m.is_empty());
        let mut m = RowMemo::new(100);
        m.first(b"x", 1);
        m.set_budget(0);
        assert!(m.is_empty());
    }

    #[test]
    fn a_row_larger_than_the_budget_is_not_kept() {
        let mut m = RowMemo::new(4);
        m.first(b"too long", 1);
        assert!(m.is_empty());
    }
}
