//! The remembered prompt filtering (`_process_compaction_events`): its
//! items and what extending them needs, extended over new events by
//! `core::filter::extend_filtered`.

use super::{Carry, Memo, Value};
use crate::core::event::Need;
use crate::core::filter::{extend_filtered, Extended, Extension, Item};
use crate::core::index::group;
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, new_items, taken, Loaded};
use crate::py::index::registry::{checkin, checkout_existing, registry, session_key};
use crate::py::index::tracked::Tracked;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// The last filtering call's result and what extending it needs.
pub(crate) struct Filtered {
    /// The result: item positions, the top bit set for a summary.
    items: Vec<u32>,
    extension: Extension,
}

impl Value for Filtered {
    const CARRY: Carry = Carry::BySlot;

    fn memory_bytes(&self) -> usize {
        self.items.capacity() * 4 + 64
    }
}

impl Filtered {
    fn items(&self) -> Vec<Item> {
        self.items.iter().map(|&i| decode_item(i)).collect()
    }
}

/// Marks an item that is a summary (see `Filtered::items`).
pub const SUMMARY_BIT: u32 = 1 << 31;

/// An item of a filtering result as `Filtered::items` keeps it.
pub fn encode_item(item: Item) -> u32 {
    match item {
        Item::Raw(i) => i as u32,
        Item::Summary(i) => i as u32 | SUMMARY_BIT,
    }
}

/// The item [`encode_item`] encoded.
pub fn decode_item(i: u32) -> Item {
    match i & SUMMARY_BIT {
        0 => Item::Raw(i as usize),
        _ => Item::Summary((i & !SUMMARY_BIT) as usize),
    }
}

impl Loaded<'_> {
    /// Remembers `items`, the result of prompt filtering on this call's
    /// list, and what extending it needs, for [`filter_again`] (when every
    /// item is bound and the list is short enough to number).
    pub fn remember_filter(&mut self, items: &[Item], extension: Extension) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        let seen = t
            .seen_of(&self.objects, &self.slots)
            .filter(|_| self.objects.len() < SUMMARY_BIT as usize);
        match seen {
            Some(seen) => t.keep_memo(Box::new(Memo {
                seen,
                value: Filtered {
                    items: items.iter().map(|&item| encode_item(item)).collect(),
                    extension,
                },
            })),
            None => t.forget_memo::<Memo<Filtered>>(),
        }
    }
}

/// Prompt filtering of `list` from the session's last one: when `list`
/// holds the last call's objects (still bound to the same slots, over an
/// unchanged index) followed by new events (resolved as any call resolves
/// its list), the last result extended over them ([`extend_filtered`]);
/// with the items the result names loaded for materializing summaries
/// (objects and slots, no views).
pub fn filter_again<'py>(
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Option<(Loaded<'py>, Vec<Item>)>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let Some(items) = extend(&mut t, list, need) else {
        checkin(key, t);
        return Ok(None);
    };
    let slots = t
        .memo::<Memo<Filtered>>()
        .map(|m| m.seen.with(|_, slots| slots.to_vec()))
        .unwrap_or_default();
    registry().counters.filters_reused += 1;
    let loaded = taken(list, key, t, slots, &items)?;
    Ok(Some((loaded, items)))
}

fn extend(t: &mut Tracked, list: &Bound<'_, PyList>, need: Need) -> Option<Vec<Item>> {
    let mut memo = t.take_memo::<Memo<Filtered>>()?;
    let known = memo.seen.len();
    let n = list.len();
    if n >= SUMMARY_BIT as usize {
        return None;
    }
    let (objects, views, slots) = new_items(t, &mut memo.seen, list, need)?;
    let mut items = memo.value.items();
    if !views.is_empty() {
        // The views of the last result's items are read from the index
        // where the tail holds compactions.
        let groups = group::TIMESTAMP | group::COMPACTION;
        let extension = &mut memo.value.extension;
        let how = memo.seen.with(|_, slots| {
            let view_of = |i: usize| t.core.view_of_groups(slots[i], 0, groups);
            extend_filtered(&mut items, extension, view_of, &views, known)
        })?;
        match how {
            Extended::Appended => memo.value.items.extend(known as u32..n as u32),
            Extended::Merged => {
                memo.value.items = items.iter().map(|&item| encode_item(item)).collect();
            }
        }
        memo.seen.extend(&objects, &slots);
    }
    t.keep_memo(memo);
    Some(items)
}
