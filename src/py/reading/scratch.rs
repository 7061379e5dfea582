//! Reused buffers for the views of a call.
//!
//! A call's views take ~150 bytes per event: at a few thousand events the
//! buffer is past the allocator's threshold for mapping fresh pages, and a
//! session that grows between calls asks for a little more every time, so
//! each call would map and fault in new zeroed pages (measured at 2,200
//! events in the turn regime: building the views took 20-85 µs per call,
//! about 22 µs without the faults). The buffers go back to a small
//! per-thread pool instead and keep their capacity.

use crate::core::event::EventView;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// Buffers kept per thread.
const KEPT: usize = 2;
/// Views a kept buffer may hold (larger ones are freed: ~2.5 MB; past
/// that, a fresh buffer per call costs little beside the call itself).
const MAX_VIEWS: usize = 1 << 14;

thread_local! {
    static POOL: RefCell<Vec<Vec<EventView>>> = const { RefCell::new(Vec::new()) };
}

/// A vector of views that returns to the pool when dropped.
#[derive(Default)]
pub struct Views(Vec<EventView>);

impl Views {
    /// An empty buffer from the pool (or a new one) with room for `n`.
    pub fn with_capacity(n: usize) -> Self {
        let mut v = POOL
            .try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        v.clear();
        v.reserve_exact(n);
        Views(v)
    }

    /// The views, out of the pool's reach.
    pub fn into_vec(mut self) -> Vec<EventView> {
        std::mem::take(&mut self.0)
    }
}

impl From<Vec<EventView>> for Views {
    fn from(v: Vec<EventView>) -> Self {
        Views(v)
    }
}

impl Drop for Views {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        if v.capacity() == 0 || v.capacity() > MAX_VIEWS {
            return;
        }
        // During thread teardown the pool may be gone: the buffer is freed.
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                if p.len() < KEPT {
                    p.push(v);
                }
            }
        });
    }
}

impl Deref for Views {
    type Target = Vec<EventView>;
    fn deref(&self) -> &Vec<EventView> {
        &self.0
    }
}

impl DerefMut for Views {
    fn deref_mut(&mut self) -> &mut Vec<EventView> {
        &mut self.0
    }
}

/// Bytes the calling thread's pool holds.
pub fn pooled_bytes() -> usize {
    POOL.try_with(|p| {
        p.try_borrow()
            .map(|p| {
                p.iter()
                    .map(|v| v.capacity() * std::mem::size_of::<EventView>())
                    .sum()
            })
            .unwrap_or(0)
    })
    .unwrap_or(0)
}
