//! The pure-Rust compaction core. Nothing in here knows about Python: the
//! binding layer (`crate::py`) extracts an [`EventView`] per event and maps the
//! indices these functions return back to the caller's objects.

pub mod analysis;
pub mod audit;
pub mod coverage;
pub mod error;
pub mod event;
pub mod exact;
pub mod filter;
pub mod hash;
pub mod index;
pub mod json_size;
pub mod lean;
pub mod lean_rows;
mod loading;
pub mod ranges;
pub mod recover;
pub mod replay;
mod replay_tail;
pub mod rewind;
pub mod rows;
pub mod scans;
pub mod select;
pub mod slot_table;
pub mod stored;
pub mod subsume;
pub mod tasks;
pub mod texts;
pub mod uuid;
pub mod window;

#[cfg(test)]
mod props;
#[cfg(test)]
mod testing;

pub use error::{guarded, CoreError};
pub use event::{CompactionView, EventView, Span, Sym};
