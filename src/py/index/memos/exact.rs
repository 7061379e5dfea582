//! Exact mode's remembered answers, one per question ([`ExactAsked`]):
//! answered again on the very same list; the prompt extended over raw
//! events by `core::coverage::extend_prompt`, a sliding-window selection's
//! coverage by the caller (see [`exact_prefix`]).

use super::filter::{decode_item, encode_item, SUMMARY_BIT};
use super::{Carry, Memo, Value};
use crate::core::coverage::{extend_prompt, Coverage, Written};
use crate::core::event::Need;
use crate::core::filter::Item;
use crate::core::EventView;
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, new_items, taken, Loaded};
use crate::py::index::registry::{checkin, checkout_existing, registry, remembered, session_key};
use crate::py::index::tracked::Tracked;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::{Arc, Mutex, OnceLock};

/// What exact mode asked of a list (see [`exact_again`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ExactAsked {
    /// The prompt.
    Prompt,
    /// A sliding-window selection: interval and overlap.
    Sliding(i64, i64),
    /// The live events only (no selection).
    Live,
    /// A tail-retention selection: the retained events, the isolation
    /// scope and the agent name (`str` or `None`, compared by value), the
    /// token threshold, and the floor (the bits of the `f64`).
    Token {
        retention: usize,
        scope: Option<Box<str>>,
        agent: Option<Box<str>>,
        threshold: i64,
        floor: u64,
    },
}

/// Exact mode's answer to one question on a list.
pub(crate) struct Exact {
    asked: ExactAsked,
    answer: Arc<ExactAnswer>,
}

impl Value for Exact {
    const CARRY: Carry = Carry::BySlot;

    fn memory_bytes(&self) -> usize {
        self.answer.memory_bytes() + 64
    }
}

/// Exact mode's remembered answers, one per question.
type Answers = Vec<Memo<Exact>>;

/// What writing a coverage record over a selection's handed-out list
/// reads: its views (timestamps, invocations, compactions) and coverage;
/// and, once read, what the rolling summary's seed takes from the
/// summaries it rolls (see `coverage::exact_seeds`).
#[derive(Debug)]
pub struct ForRecord {
    pub views: Vec<EventView>,
    pub coverage: Coverage,
    pub seeds: OnceLock<SeedParts>,
    /// The record last written over these views with no foreign event:
    /// `(handed, seeds, written)`.
    pub written: Mutex<Option<WrittenOver>>,
}

/// A record written over a handed-out list: the positions it was asked
/// for and what `coverage::write` made of them.
pub type WrittenOver = (Vec<usize>, Vec<usize>, Option<Written>);

/// What the rolling summary's seed takes from the compaction events at
/// `positions` of a handed-out list: their summaries' parts in order, the
/// last summary's role, each summary's serialized size and the earliest
/// interval start (`None`: none is set).
#[derive(Debug)]
pub struct SeedParts {
    pub positions: Vec<usize>,
    pub parts: Py<PyList>,
    pub role: Py<PyAny>,
    pub sizes: Vec<i64>,
    pub start: Option<f64>,
}

/// An exact-mode answer: up to two lists of positions (a prompt's items,
/// or a selection's two lists) and the records that were not used.
#[derive(Debug, Default)]
pub struct ExactAnswer {
    pub first: Vec<u32>,
    pub second: Vec<u32>,
    /// A selection's list positions: the rewound events and those of its
    /// scope (`None`: every event), whose positions `first` and `second`
    /// are.
    pub rewound: Option<Vec<u32>>,
    pub scoped: Option<Vec<u32>>,
    /// A tail-retention selection's observed prompt token count.
    pub count: Option<i64>,
    /// A selection's earliest timestamp its compaction can reach (see
    /// `coverage::earliest`).
    pub since: f64,
    /// What a selection's record is written from (see
    /// `coverage::ExactSelection`).
    pub record: Option<Arc<ForRecord>>,
    /// A sliding-window selection's coverage, extended for the list with
    /// raw events appended (see [`exact_prefix`]).
    pub coverage: Option<Arc<Coverage>>,
    pub problems: Vec<(usize, String)>,
    /// A prompt's last sort key (its last item's timestamp, or interval
    /// end for a summary; -inf for an empty prompt, NaN when unknown).
    pub last: f64,
}

impl ExactAnswer {
    fn memory_bytes(&self) -> usize {
        let positions = |v: &Option<Vec<u32>>| v.as_ref().map_or(0, Vec::capacity);
        (self.first.capacity()
            + self.second.capacity()
            + positions(&self.rewound)
            + positions(&self.scoped))
            * 4
            + self.record.as_ref().map_or(0, |r| {
                r.views.len() * std::mem::size_of::<EventView>() + coverage_bytes(&r.coverage)
            })
            + self.coverage.as_deref().map_or(0, coverage_bytes)
            + self
                .problems
                .iter()
                .map(|(_, why)| why.len() + 32)
                .sum::<usize>()
    }
}

/// Bytes a coverage holds, about.
fn coverage_bytes(c: &Coverage) -> usize {
    c.hidden.len()
        + c.survive.len() * 8
        + c.extents
            .iter()
            .map(|x| 48 + x.holes.len() * 16)
            .sum::<usize>()
}

impl<'py> Loaded<'py> {
    /// Remembers `answer`, exact mode's answer to `asked` on this call's
    /// list, for [`exact_again`] (when every item is bound).
    pub fn remember_exact(&mut self, asked: ExactAsked, answer: Arc<ExactAnswer>) {
        let objects = std::mem::take(&mut self.objects);
        self.remember_exact_for(&objects, asked, answer);
        self.objects = objects;
    }

    /// [`remember_exact`](Loaded::remember_exact) for a call that took the
    /// list's objects (`objects`) out of this.
    pub fn remember_exact_for(
        &mut self,
        objects: &[Bound<'py, PyAny>],
        asked: ExactAsked,
        answer: Arc<ExactAnswer>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        let Some(seen) = t.seen_of(objects, &self.slots) else {
            return;
        };
        let memo = Memo {
            seen,
            value: Exact { asked, answer },
        };
        match t.memo_mut::<Answers>() {
            Some(answers) => {
                answers.retain(|m| m.value.asked != memo.value.asked);
                answers.push(memo);
            }
            None => t.keep_memo(Box::new(vec![memo])),
        }
    }
}

/// Exact mode's answer to `asked` from the session's last one, when `list`
/// holds exactly the objects it was computed on (none of the session's
/// bound objects died since, over an unchanged index): exact mode reads
/// nothing but the events, so the same events give the same answer.
/// `None`: compute.
pub fn exact_again(
    list: &Bound<'_, PyList>,
    asked: ExactAsked,
) -> Extracted<Option<Arc<ExactAnswer>>> {
    remembered(
        list,
        |t| {
            t.memo::<Answers>()?
                .iter()
                .find(|m| m.value.asked == asked && t.unchanged(&m.seen, list))
                .map(|m| m.value.answer.clone())
        },
        |c| c.exact_reused += 1,
    )
}

/// The coverage remembered with the last answer to `asked` when `list`
/// begins with that answer's list (the same objects, each still bound, over
/// an unchanged index) and that list had no rewind and no event of another
/// scope: `(its length, coverage, unused records)`. A selection over `list`
/// extends it when what follows is raw events only: an event stored after
/// every compaction is covered by none, so the extents, the survivors and
/// what they hide stay as they were (see `coverage::Scoped::cover`).
#[allow(clippy::type_complexity)]
pub fn exact_prefix(
    list: &Bound<'_, PyList>,
    asked: &ExactAsked,
) -> Extracted<Option<(usize, Arc<Coverage>, Vec<(usize, String)>)>> {
    remembered(
        list,
        |t| {
            let mut answers = t.take_memo::<Answers>()?;
            let found = answers
                .iter_mut()
                .find(|m| &m.value.asked == asked)
                .and_then(|memo| {
                    let a = memo.value.answer.clone();
                    let whole = a.rewound.is_none() && a.scoped.is_none();
                    match (&a.coverage, whole && t.begins(&mut memo.seen, list)) {
                        (Some(c), true) => Some((memo.seen.len(), c.clone(), a.problems.clone())),
                        _ => None,
                    }
                });
            t.keep_memo(answers);
            found
        },
        // Counted where it is used (see [`count_exact_extended`]).
        |_| {},
    )
}

/// Notes that a selection extended a remembered coverage.
pub fn count_exact_extended() {
    registry().counters.exact_extended += 1;
}

/// Exact mode's prompt items of `list` from the session's last ones, when
/// `list` holds exactly their objects (see [`exact_again`]) or those
/// followed by raw events in order (see [`extend`]), with the items loaded
/// for materializing summaries (see `load::taken`) and the records that
/// were not used.
#[allow(clippy::type_complexity)]
pub fn exact_prompt_again<'py>(
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Option<(Loaded<'py>, Vec<Item>, Vec<(usize, String)>)>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let Some(mut answers) = t.take_memo::<Answers>() else {
        checkin(key, t);
        return Ok(None);
    };
    let Some(k) = answers
        .iter()
        .position(|m| m.value.asked == ExactAsked::Prompt)
    else {
        t.keep_memo(answers);
        checkin(key, t);
        return Ok(None);
    };
    let mut memo = answers.swap_remove(k);
    if !t.unchanged(&memo.seen, list) && !extend(&mut t, &mut memo, list, need) {
        // Dropped: the call computes the prompt and remembers it anew.
        t.keep_memo(answers);
        checkin(key, t);
        return Ok(None);
    }
    let (answer, slots) = (memo.value.answer.clone(), memo.seen.with(|_, s| s.to_vec()));
    answers.push(memo);
    t.keep_memo(answers);
    registry().counters.exact_reused += 1;
    let items: Vec<Item> = answer.first.iter().map(|&i| decode_item(i)).collect();
    let loaded = taken(list, key, t, slots, &items)?;
    Ok(Some((loaded, items, answer.problems.clone())))
}

/// Extends the remembered exact-mode prompt `memo` to `list`, when `list`
/// holds its objects followed by events that [`extend_prompt`] appends:
/// raw events stamped in order from the prompt's last sort key on.
fn extend(t: &mut Tracked, memo: &mut Memo<Exact>, list: &Bound<'_, PyList>, need: Need) -> bool {
    let known = memo.seen.len();
    let answer = &memo.value.answer;
    // Checked before the new events are read: a prompt without a usable
    // last key never extends.
    if extend_prompt(answer.last, &[]).is_none() || list.len() >= SUMMARY_BIT as usize {
        return false;
    }
    let Some((objects, views, slots)) = new_items(t, &mut memo.seen, list, need) else {
        return false;
    };
    let Some(last) = extend_prompt(memo.value.answer.last, &views) else {
        return false;
    };
    memo.seen.extend(&objects, &slots);
    let answer = &memo.value.answer;
    let mut first = answer.first.clone();
    first.extend((known..known + views.len()).map(|i| encode_item(Item::Raw(i))));
    memo.value.answer = Arc::new(ExactAnswer {
        first,
        problems: answer.problems.clone(),
        last,
        ..ExactAnswer::default()
    });
    true
}
