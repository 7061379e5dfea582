//! The remembered `apply_rewinds`: the positions that survived, extended
//! over new events by `core::rewind::extend_kept`.

use super::{Carry, Memo, Value};
use crate::core::event::Need;
use crate::core::rewind::extend_kept;
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, new_items, Loaded};
use crate::py::index::registry::remembered;
use crate::py::index::tracked::Tracked;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// The positions that survived the last rewinds call.
pub(crate) struct Kept(Vec<u32>);

impl Value for Kept {
    const CARRY: Carry = Carry::Positional;

    fn memory_bytes(&self) -> usize {
        self.0.capacity() * 4
    }
}

impl Loaded<'_> {
    /// Remembers `kept`, the result of `apply_rewinds` on this call's list,
    /// for [`rewinds_again`] (when every item is bound).
    pub fn remember_rewinds(&mut self, kept: &[usize]) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        match t.seen_of(&self.objects, &self.slots) {
            Some(seen) => t.keep_memo(Box::new(Memo {
                seen,
                value: Kept(kept.iter().map(|&i| i as u32).collect()),
            })),
            None => t.forget_memo::<Memo<Kept>>(),
        }
    }
}

/// `apply_rewinds` on `list` from the session's last one, without reading
/// or viewing the events it had: when `list` holds the last call's objects
/// (still bound to the same slots, over an unchanged index) followed by
/// events that carry no rewind (nothing before them changes, and they all
/// stay; they are resolved as any call resolves its list: new ones read and
/// stored), the surviving positions. `None`: compute.
pub fn rewinds_again(list: &Bound<'_, PyList>) -> Extracted<Option<Vec<u32>>> {
    remembered(list, |t| extend(t, list), |c| c.rewinds_reused += 1)
}

fn extend(t: &mut Tracked, list: &Bound<'_, PyList>) -> Option<Vec<u32>> {
    let mut memo = t.take_memo::<Memo<Kept>>()?;
    let known = memo.seen.len();
    let need = Need {
        rewind: true,
        invocation: true,
        ..Need::default()
    };
    let (objects, views, slots) = new_items(t, &mut memo.seen, list, need)?;
    if !extend_kept(&mut memo.value.0, known, &views) {
        return None;
    }
    memo.seen.extend(&objects, &slots);
    let kept = memo.value.0.clone();
    t.keep_memo(memo);
    Some(kept)
}
