//! The remembered ids of a stored session's list, for
//! `InMemorySessionService.append_event`'s re-delivery test (an equal event
//! with the same id already stored): the positions of each id, extended
//! over the events appended since, so the test reads the new events' ids
//! and not the whole session's.

use super::{Carry, Memo, Value};
use crate::core::event::Need;
use crate::core::hash::FastMap;
use crate::core::index::id_key;
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, new_items, Loaded};
use crate::py::index::objects::event_id;
use crate::py::index::registry::remembered;
use crate::py::index::tracked::Tracked;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Positions of the list's events by the key of their id
/// (`core::index::id_key`; keys are only a first cut, the caller compares
/// the ids themselves).
#[derive(Default)]
pub(crate) struct Ids(FastMap<u64, Vec<u32>>);

impl Value for Ids {
    const CARRY: Carry = Carry::No;

    fn memory_bytes(&self) -> usize {
        crate::core::index::map_bytes(&self.0) + self.0.len() * 4
    }
}

impl Ids {
    /// Adds the events `objects`, at positions from `from` on; `None`
    /// where one has no plain `str` id.
    fn extend(&mut self, from: usize, objects: &[Bound<'_, PyAny>]) -> Extracted<Option<()>> {
        for (k, obj) in objects.iter().enumerate() {
            let Some(id) = event_id(obj)? else {
                return Ok(None);
            };
            let at =
                u32::try_from(from + k).map_err(|_| crate::py::error::Outcome::Decline("size"))?;
            self.0.entry(id_key(id.to_str()?)).or_default().push(at);
        }
        Ok(Some(()))
    }

    fn positions(&self, id: &str) -> Vec<usize> {
        self.0
            .get(&id_key(id))
            .map(|p| p.iter().map(|&i| i as usize).collect())
            .unwrap_or_default()
    }
}

impl Loaded<'_> {
    /// The positions of the events of this call's list whose id has the
    /// key of `id` (ascending), remembered for [`same_id_again`] when every
    /// item is bound; `None` where an event has no plain `str` id.
    pub fn same_id(&mut self, id: &str) -> Extracted<Option<Vec<usize>>> {
        let mut ids = Ids::default();
        if ids.extend(0, &self.objects)?.is_none() {
            return Ok(None);
        }
        let positions = ids.positions(id);
        if let Some(t) = memo_index(&mut self.checkout, &self.at) {
            match t.seen_of(&self.objects, &self.slots) {
                Some(seen) => t.keep_memo(Box::new(Memo { seen, value: ids })),
                None => t.forget_memo::<Memo<Ids>>(),
            }
        }
        Ok(Some(positions))
    }
}

/// [`Loaded::same_id`] on `list` from the ids remembered of the session's
/// stored list: when `list` holds the objects they were read of (bound to
/// the same slots, over an unchanged index) followed by new ones, only the
/// new ones' ids are read. `None`: read the whole list.
pub fn same_id_again(list: &Bound<'_, PyList>, id: &str) -> Extracted<Option<Vec<usize>>> {
    remembered(list, |t| extend(t, list, id), |c| c.redelivery_reused += 1)
}

fn extend(t: &mut Tracked, list: &Bound<'_, PyList>, id: &str) -> Option<Vec<usize>> {
    let mut memo = t.take_memo::<Memo<Ids>>()?;
    let known = memo.seen.len();
    let (objects, _, slots) = new_items(t, &mut memo.seen, list, Need::NONE)?;
    memo.value.extend(known, &objects).ok()??;
    memo.seen.extend(&objects, &slots);
    let positions = memo.value.positions(id);
    t.keep_memo(memo);
    Some(positions)
}
