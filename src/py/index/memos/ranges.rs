//! The remembered `get_compaction_ranges`: the ranges that survived,
//! extended over new events by `core::ranges::extend_ranges`.

use super::{Carry, Memo, Value};
use crate::core::event::Need;
use crate::core::ranges::{extend_ranges, CompactionRange};
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, new_items, Loaded};
use crate::py::index::registry::remembered;
use crate::py::index::tracked::Tracked;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// The ranges that survived the last compaction-ranges call.
pub(crate) struct Ranges(Vec<CompactionRange>);

impl Value for Ranges {
    const CARRY: Carry = Carry::Positional;

    fn memory_bytes(&self) -> usize {
        self.0.capacity() * std::mem::size_of::<CompactionRange>()
    }
}

impl Loaded<'_> {
    /// Remembers `ranges`, the result of `get_compaction_ranges` on this
    /// call's list, for [`ranges_again`] (when every item is bound).
    pub fn remember_ranges(&mut self, ranges: &[CompactionRange]) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        match t.seen_of(&self.objects, &self.slots) {
            Some(seen) => t.keep_memo(Box::new(Memo {
                seen,
                value: Ranges(ranges.to_vec()),
            })),
            None => t.forget_memo::<Memo<Ranges>>(),
        }
    }
}

/// The compaction ranges of `list` from the session's last call: when
/// `list` holds the last call's objects (still bound to the same slots,
/// over an unchanged index) followed by new events (resolved as any call
/// resolves its list), the last ranges extended by the new events' (see
/// [`extend_ranges`]).
pub fn ranges_again(list: &Bound<'_, PyList>) -> Extracted<Option<Vec<CompactionRange>>> {
    remembered(list, |t| extend(t, list), |c| c.ranges_reused += 1)
}

fn extend(t: &mut Tracked, list: &Bound<'_, PyList>) -> Option<Vec<CompactionRange>> {
    let mut memo = t.take_memo::<Memo<Ranges>>()?;
    let known = memo.seen.len();
    let need = Need {
        compaction: true,
        ..Need::default()
    };
    let (objects, views, slots) = new_items(t, &mut memo.seen, list, need)?;
    if !views.is_empty() {
        let ranges = std::mem::take(&mut memo.value.0);
        memo.value.0 = extend_ranges(ranges, known, &views);
        memo.seen.extend(&objects, &slots);
    }
    let ranges = memo.value.0.clone();
    t.keep_memo(memo);
    Some(ranges)
}
