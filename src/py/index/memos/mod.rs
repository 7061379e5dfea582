//! What a session's index remembers of its last calls, one slot per
//! operation: each file here holds one operation's remembered value, how a
//! call remembers it (`Loaded::remember_*`), how the next call is answered
//! from it (`*_again`, extending it over new events with the core's rule),
//! and how it follows a session copy ([`Carry`]).
//!
//! The slots are kept in `Tracked` by type ([`Remembered`], as
//! `http::Extensions` keeps values), so that the index knows none of the
//! operations: each operation's file depends on the index, never the other
//! way round.

pub mod exact;
pub mod filter;
pub mod lean;
pub mod ranges;
pub mod recovery;
pub mod redelivery;
pub mod rewinds;
pub mod selection;

use super::seen::Seen;
use std::any::Any;

/// A result remembered from a call on a session's list, and the objects it
/// was computed from.
pub(crate) struct Memo<T> {
    pub(crate) seen: Seen,
    pub(crate) value: T,
}

/// How a remembered result follows a deep copy of its session (see
/// `copies::index_copied`): the invocation's first calls are then answered
/// from it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// It stays with the objects it names.
    No,
    /// It names the copies at its positions of the copied list, when each
    /// was bound just now to the slot it names there (a result over the
    /// session's list itself).
    Positional,
    /// It names the copies bound just now to every slot it names (a
    /// result over a list made of some of the session's events).
    BySlot,
}

/// What one operation remembers besides the objects (the `T` of a
/// [`Memo`]).
pub(crate) trait Value: Send + 'static {
    /// How it follows a session copy.
    const CARRY: Carry;

    /// Bytes it holds, about.
    fn memory_bytes(&self) -> usize;
}

/// A slot of `Tracked::memos`, one per type: an operation's [`Memo`], or
/// several (one per question, see `exact`).
pub(crate) trait Remembered: Any + Send {
    /// Calls `f` with the objects of each result it holds.
    fn each_seen(&self, f: &mut dyn FnMut(&Seen));

    /// Calls `f` with the objects of each result it holds, to change them.
    fn each_seen_mut(&mut self, f: &mut dyn FnMut(&mut Seen));

    /// How its results follow a session copy.
    fn carry(&self) -> Carry;

    /// Bytes it holds besides the records of its objects, about.
    fn memory_bytes(&self) -> usize;
}

impl<T: Value> Remembered for Memo<T> {
    fn each_seen(&self, f: &mut dyn FnMut(&Seen)) {
        f(&self.seen);
    }

    fn each_seen_mut(&mut self, f: &mut dyn FnMut(&mut Seen)) {
        f(&mut self.seen);
    }

    fn carry(&self) -> Carry {
        T::CARRY
    }

    fn memory_bytes(&self) -> usize {
        self.value.memory_bytes()
    }
}

impl<T: Value> Remembered for Vec<Memo<T>> {
    fn each_seen(&self, f: &mut dyn FnMut(&Seen)) {
        self.iter().for_each(|m| f(&m.seen));
    }

    fn each_seen_mut(&mut self, f: &mut dyn FnMut(&mut Seen)) {
        self.iter_mut().for_each(|m| f(&mut m.seen));
    }

    fn carry(&self) -> Carry {
        T::CARRY
    }

    fn memory_bytes(&self) -> usize {
        self.iter().map(|m| m.value.memory_bytes()).sum()
    }
}
