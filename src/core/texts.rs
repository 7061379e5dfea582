//! A table of distinct texts, each named by a dense symbol.
//!
//! The binding layer interns ids (invocation ids, function-call ids) into
//! symbols while it reads events; a cold read of a session meets a few
//! thousand new texts per call, and a session index keeps its table for the
//! session's life. So the table is built for both: a new text costs one
//! hash, one probe and one copy into a page of text (no allocation of its
//! own), and it holds about 12 bytes per text besides the text itself and
//! 4 bytes per bucket (open addressing over symbols; each symbol keeps its
//! text's hash, so growing rehashes without reading a text).

use super::hash::FastHasher;
use super::Sym;
use std::hash::Hasher;

/// An empty bucket.
const EMPTY: Sym = Sym::MAX;
/// Bytes of a page of text. Texts up to this long are copied into pages
/// (never across two); longer ones are kept whole on their own.
const PAGE: usize = 4096;

/// Where a symbol's text is: `offset` into the pages (page `offset / PAGE`),
/// or, for a text longer than a page, the index of its own allocation.
#[derive(Clone, Copy)]
struct Entry {
    offset: u32,
    len: u32,
}

/// Distinct texts and their symbols, `0, 1, 2, ...` in first-seen order.
#[derive(Default)]
pub struct Texts {
    /// Open-addressing buckets (a power of two of them, at most 7/8 full):
    /// symbols, probed linearly from their hash.
    buckets: Vec<Sym>,
    /// Per symbol: its text's hash, and where the text is.
    hashes: Vec<u32>,
    entries: Vec<Entry>,
    pages: Vec<String>,
    long: Vec<Box<str>>,
}

/// The table is full: `u32::MAX` symbols, or texts past `u32::MAX` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

fn hash(text: &str) -> u64 {
    let mut h = FastHasher::default();
    h.write(text.as_bytes());
    h.write_usize(text.len());
    h.finish()
}

impl Texts {
    /// Symbols given so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no text has a symbol.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The text of `sym`.
    pub fn text(&self, sym: Sym) -> &str {
        let e = self.entries[sym as usize];
        let (offset, len) = (e.offset as usize, e.len as usize);
        if len > PAGE {
            &self.long[offset]
        } else {
            let at = offset % PAGE;
            &self.pages[offset / PAGE][at..at + len]
        }
    }

    /// Room for `additional` more texts without growing the buckets.
    pub fn reserve(&mut self, additional: usize) {
        let want = self.len() + additional;
        if want * 8 > self.buckets.len() * 7 {
            self.rehash(want);
        }
        self.entries.reserve(additional);
        self.hashes.reserve(additional);
    }

    /// Rebuilds the buckets with room for `n` symbols.
    fn rehash(&mut self, n: usize) {
        let size = (n * 8 / 7 + 1).next_power_of_two().max(16);
        self.buckets.clear();
        self.buckets.resize(size, EMPTY);
        let mask = size - 1;
        for (sym, &h) in self.hashes.iter().enumerate() {
            let mut b = h as usize & mask;
            while self.buckets[b] != EMPTY {
                b = (b + 1) & mask;
            }
            self.buckets[b] = sym as Sym;
        }
    }

    /// The bucket of `text` (hashed `h`): where its symbol is, or the empty
    /// bucket it would go to.
    #[inline]
    fn probe(&self, h: u32, text: &str) -> usize {
        let mask = self.buckets.len() - 1;
        let mut b = h as usize & mask;
        loop {
            let sym = self.buckets[b];
            if sym == EMPTY || (self.hashes[sym as usize] == h && self.text(sym) == text) {
                return b;
            }
            b = (b + 1) & mask;
        }
    }

    /// The symbol of `text`, if it has one (the tests' view: interning
    /// asks [`Texts::symbol`]).
    #[cfg(test)]
    fn get(&self, text: &str) -> Option<Sym> {
        if self.buckets.is_empty() {
            return None;
        }
        let b = self.probe(hash(text) as u32, text);
        Some(self.buckets[b]).filter(|&s| s != EMPTY)
    }

    /// The symbol of `text`, given one now if it has none.
    pub fn symbol(&mut self, text: &str) -> Result<Sym, Full> {
        if (self.len() + 1) * 8 > self.buckets.len() * 7 {
            self.rehash((self.len() + 1) * 2);
        }
        let h = hash(text) as u32;
        let b = self.probe(h, text);
        if self.buckets[b] != EMPTY {
            return Ok(self.buckets[b]);
        }
        let sym = Sym::try_from(self.len())
            .ok()
            .filter(|&s| s != EMPTY)
            .ok_or(Full)?;
        let len = u32::try_from(text.len()).map_err(|_| Full)?;
        let offset = if text.len() > PAGE {
            self.long.push(text.into());
            self.long.len() - 1
        } else {
            let fits = self
                .pages
                .last()
                .is_some_and(|p| p.len() + text.len() <= PAGE);
            if !fits {
                self.pages.push(String::with_capacity(PAGE));
            }
            let page = self.pages.len() - 1;
            let p = &mut self.pages[page];
            let offset = page * PAGE + p.len();
            p.push_str(text);
            offset
        };
        let offset = u32::try_from(offset).map_err(|_| Full)?;
        self.entries.push(Entry { offset, len });
        self.hashes.push(h);
        self.buckets[b] = sym;
        Ok(sym)
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Sym>()
            + self.hashes.capacity() * std::mem::size_of::<u32>()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.pages.iter().map(String::capacity).sum::<usize>()
            + self.pages.capacity() * std::mem::size_of::<String>()
            + self.long.iter().map(|t| t.len()).sum::<usize>()
            + self.long.capacity() * std::mem::size_of::<Box<str>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_texts_share_a_symbol_in_first_seen_order() {
        let mut t = Texts::default();
        assert_eq!(t.get("a"), None);
        assert_eq!(t.symbol(""), Ok(0));
        assert_eq!(t.symbol("a"), Ok(1));
        assert_eq!(t.symbol("b"), Ok(2));
        assert_eq!(t.symbol("a"), Ok(1));
        assert_eq!(t.get("b"), Some(2));
        assert_eq!(t.get("c"), None);
        assert_eq!(t.text(1), "a");
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn texts_of_equal_hash_are_told_apart() {
        let mut t = Texts::default();
        let a = t.symbol("first").unwrap();
        // Forge a text whose (truncated) hash equals "first"'s: stored as
        // if hashed alike, it must still not answer for "first".
        let h = hash("first") as u32;
        t.hashes[a as usize] = h;
        let b = t.symbol("second").unwrap();
        t.hashes[b as usize] = h;
        t.rehash(t.len());
        assert_eq!(
            t.probe(h, "first"),
            t.buckets.iter().position(|&s| s == a).unwrap()
        );
        assert_eq!(
            t.probe(h, "second"),
            t.buckets.iter().position(|&s| s == b).unwrap()
        );
        assert_eq!(t.buckets[t.probe(h, "third")], EMPTY);
    }

    #[test]
    fn long_texts_and_full_pages_keep_their_text() {
        let mut t = Texts::default();
        let long = "x".repeat(PAGE + 1);
        let texts: Vec<String> = (0..600).map(|i| format!("{i:0>30}")).collect();
        let l = t.symbol(&long).unwrap();
        let syms: Vec<Sym> = texts.iter().map(|s| t.symbol(s).unwrap()).collect();
        assert_eq!(t.text(l), long);
        for (s, text) in syms.iter().zip(&texts) {
            assert_eq!(t.text(*s), text);
            assert_eq!(t.get(text), Some(*s));
        }
        assert!(t.pages.len() > 1);
        // No more than a page of slack besides the per-page ends.
        let stored: usize = texts.iter().map(String::len).sum();
        let paged: usize = t.pages.iter().map(String::capacity).sum();
        assert!(paged < stored + PAGE + 32 * t.pages.len());
    }

    proptest! {
        /// Symbols are dense and name the texts given, equal texts alike.
        #[test]
        fn symbols_name_their_texts(texts in proptest::collection::vec("[ab]{0,3}", 0..60)) {
            let mut t = Texts::default();
            let mut seen: Vec<String> = Vec::new();
            for text in &texts {
                let sym = t.symbol(text).unwrap();
                let want = match seen.iter().position(|s| s == text) {
                    Some(k) => k,
                    None => {
                        seen.push(text.clone());
                        seen.len() - 1
                    }
                };
                prop_assert_eq!(sym as usize, want);
                prop_assert_eq!(t.text(sym), text.as_str());
            }
            prop_assert_eq!(t.len(), seen.len());
            for (k, text) in seen.iter().enumerate() {
                prop_assert_eq!(t.get(text), Some(k as Sym));
            }
        }
    }
}
