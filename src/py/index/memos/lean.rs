//! The remembered lean decision: a stored session's lean list, kept up to
//! date as the session grows by `core::lean::Dropped::admits`, without
//! reading the events it left out.

use super::{Carry, Memo, Value};
use crate::core::event::{EventView, Sym};
use crate::core::guarded;
use crate::core::index::copy_spans;
use crate::core::lean::{decide_grown, Dropped, Facts, Settings, Turn};
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, new_items, Loaded};
use crate::py::index::registry::remembered;
use crate::py::index::tracked::Tracked;
use crate::py::reading::facts::read_facts;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

/// The last lean decision on a session's list: its settings, the positions
/// kept with their views and facts (spans into its own arenas), and what it
/// left out.
pub(crate) struct Lean {
    settings: Settings,
    kept: Vec<u32>,
    views: Vec<EventView>,
    ids: Vec<Sym>,
    facts: Vec<Facts>,
    refs: Vec<Sym>,
    dropped: Dropped,
}

impl Value for Lean {
    const CARRY: Carry = Carry::No;

    fn memory_bytes(&self) -> usize {
        self.kept.capacity() * 4
            + self.views.capacity() * std::mem::size_of::<EventView>()
            + (self.ids.capacity() + self.refs.capacity()) * 4
            + self.facts.capacity() * std::mem::size_of::<Facts>()
            + self.dropped.memory_bytes()
    }
}

impl Lean {
    /// The decision's kept events, with their own arenas.
    fn new(
        settings: Settings,
        kept: &[usize],
        (views, ids): (&[EventView], &[Sym]),
        (facts, refs): (&[Facts], &[Sym]),
        dropped: Dropped,
    ) -> Self {
        let mut lean = Lean {
            settings,
            kept: kept.iter().map(|&i| i as u32).collect(),
            views: Vec::with_capacity(kept.len()),
            ids: Vec::new(),
            facts: Vec::with_capacity(kept.len()),
            refs: Vec::new(),
            dropped,
        };
        for &i in kept {
            lean.push(&views[i], ids, &facts[i], refs);
        }
        lean
    }

    fn push(&mut self, view: &EventView, ids: &[Sym], facts: &Facts, refs: &[Sym]) {
        self.views.push(copy_spans(view, ids, &mut self.ids));
        let start = self.refs.len() as u32;
        self.refs.extend_from_slice(facts.refs.of(refs));
        self.facts.push(Facts {
            refs: crate::core::event::Span {
                start,
                len: facts.refs.len,
            },
            ..*facts
        });
    }
}

impl Loaded<'_> {
    /// Remembers the lean decision `kept` (with what it left out) made on
    /// this call's list, whose facts are `facts` (refs in `refs`), for
    /// [`lean_again`] (when every item is bound).
    pub fn remember_lean(
        &mut self,
        settings: Settings,
        kept: &[usize],
        (facts, refs): (&[Facts], &[Sym]),
        dropped: Dropped,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        match t.seen_of(&self.objects, &self.slots) {
            Some(seen) => {
                let value = Lean::new(
                    settings,
                    kept,
                    (&self.views, &self.ex.ids),
                    (facts, refs),
                    dropped,
                );
                t.keep_memo(Box::new(Memo { seen, value }));
            }
            None => t.forget_memo::<Memo<Lean>>(),
        }
    }
}

/// The lean positions of `list` from the session's last decision, without
/// reading the events it left out: when `list` holds the last call's objects
/// (bound to the same slots, over an unchanged index) followed by events
/// that decision admits (`Dropped::admits`), the kept events and the new
/// ones decided again. `None`: decide over the whole list.
pub fn lean_again(
    list: &Bound<'_, PyList>,
    settings: Settings,
    underway: &[Bound<'_, PyString>],
    answering: &[Bound<'_, PyString>],
) -> Extracted<Option<Vec<usize>>> {
    remembered(
        list,
        |t| extend(t, list, settings, (underway, answering)),
        |c| c.lean_reused += 1,
    )
}

type Strings<'a, 'py> = (&'a [Bound<'py, PyString>], &'a [Bound<'py, PyString>]);

fn extend(
    t: &mut Tracked,
    list: &Bound<'_, PyList>,
    settings: Settings,
    (underway, answering): Strings<'_, '_>,
) -> Option<Vec<usize>> {
    let mut memo = t.take_memo::<Memo<Lean>>()?;
    if memo.value.settings != settings {
        return None;
    }
    let known = memo.seen.len();
    let (objects, views, slots) =
        new_items(t, &mut memo.seen, list, crate::core::event::Need::ALL)?;
    let mut texts = |strings: &[Bound<'_, PyString>]| -> Option<Vec<Sym>> {
        strings
            .iter()
            .map(|s| t.interner.text(s.to_str().ok()?).ok())
            .collect()
    };
    let underway = texts(underway)?;
    let answering = texts(answering)?;
    let turn = Turn {
        underway: &underway,
        answering: &answering,
    };
    let mut refs: Vec<Sym> = Vec::new();
    let mut facts = Vec::with_capacity(objects.len());
    for obj in &objects {
        facts.push(read_facts(obj, &mut t.interner, &mut refs).ok()?);
    }
    // The tail's spans index the index's own arena; pushed, they index the
    // decision's own.
    let arena = t.core.arena();
    let lean = &mut memo.value;
    for (view, f) in views.iter().zip(&facts) {
        lean.push(view, arena, f, &refs);
    }
    lean.kept
        .extend((known..known + objects.len()).map(|i| i as u32));
    let mut dropped = std::mem::take(&mut lean.dropped);
    let keep = guarded(|| {
        Ok(decide_grown(
            &lean.views,
            &lean.facts,
            (&lean.ids, &lean.refs),
            objects.len(),
            &mut dropped,
            &settings,
            turn,
        ))
    })
    .ok()??;
    let positions: Vec<usize> = keep.iter().map(|&k| lean.kept[k] as usize).collect();
    let mut next = Lean {
        settings,
        kept: Vec::new(),
        views: Vec::new(),
        ids: Vec::new(),
        facts: Vec::new(),
        refs: Vec::new(),
        dropped,
    };
    for &k in &keep {
        next.push(&lean.views[k], &lean.ids, &lean.facts[k], &lean.refs);
    }
    next.kept = positions.iter().map(|&i| i as u32).collect();
    memo.seen.extend(&objects, &slots);
    memo.value = next;
    t.keep_memo(memo);
    Some(positions)
}
