//! The remembered window selection (sliding window or token threshold):
//! answered again on the very same list only.

use super::{Carry, Memo, Value};
use crate::core::select::{Asked, Plan};
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, Loaded};
use crate::py::index::registry::remembered;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::Arc;

/// The last window selection: what it was asked besides its list, and its
/// answer.
pub(crate) struct Selection {
    asked: Asked,
    plan: Arc<Plan>,
}

impl Value for Selection {
    const CARRY: Carry = Carry::No;

    fn memory_bytes(&self) -> usize {
        self.plan.memory_bytes() + 64
    }
}

impl<'py> Loaded<'py> {
    /// Remembers `plan`, the answer of a window selection asked `asked` on
    /// this call's list (`objects`, taken from the batch), for
    /// [`selection_again`] (when every item is bound).
    pub fn remember_selection(
        &mut self,
        objects: &[Bound<'py, PyAny>],
        asked: Asked,
        plan: Arc<Plan>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        match t.seen_of(objects, &self.slots) {
            Some(seen) => t.keep_memo(Box::new(Memo {
                seen,
                value: Selection { asked, plan },
            })),
            None => t.forget_memo::<Memo<Selection>>(),
        }
    }
}

/// The answer of the session's last window selection, when it was asked
/// `asked` too and `list` holds exactly its objects (none of the session's
/// bound objects died since, over an unchanged index): a selection reads
/// nothing but the events, so the same events give the same answer.
/// `None`: compute.
pub fn selection_again(list: &Bound<'_, PyList>, asked: &Asked) -> Extracted<Option<Arc<Plan>>> {
    remembered(
        list,
        |t| {
            let memo = t.memo::<Memo<Selection>>()?;
            (memo.value.asked == *asked && t.unchanged(&memo.seen, list))
                .then(|| memo.value.plan.clone())
        },
        |c| c.selections_reused += 1,
    )
}
