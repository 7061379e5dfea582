//! A call's list resolved against its session's index (`load`): the
//! identity pass, reading what is new or changed, the views handed to the
//! core, and the core's [`Reader`] over them ([`Reading`]).

use super::registry::{checkin, checkout, registry, session_key, Counters};
use super::seen::Seen;
use super::tracked::Tracked;
use crate::core::event::{Need, Sym};
use crate::core::filter::Item;
use crate::core::index::{copy_spans, group, id_key, pick, EventIndex};
use crate::core::select::Reader;
use crate::core::slot_table::Slot;
use crate::core::EventView;
use crate::py::error::{Extracted, Outcome};
use crate::py::reading::extract::{event_dict, Extractor, CHUNK};
use crate::py::reading::scratch::Views;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// A list's events as views, and the objects themselves. Returns the
/// session's index to the registry when dropped.
pub struct Loaded<'py> {
    pub objects: Vec<Bound<'py, PyAny>>,
    pub views: Views,
    /// Extractor for events outside the list; its arena holds the views'
    /// ids (the index's arena while the index is checked out).
    pub ex: Extractor<'py>,
    /// The slot of each object (`Slot::MAX` when not stored).
    pub(super) slots: Vec<Slot>,
    /// When not empty, `objects` holds only some of the list's items and
    /// this gives each position's place in it (`u32::MAX`: not taken; see
    /// `memos::filter::filter_again`).
    pub(super) at: Vec<u32>,
    pub(super) checkout: Option<(Box<str>, Tracked)>,
    /// Field groups [`complete`](Loaded::complete) read from bound objects
    /// whose slots had not confirmed them: each slot's view (spans into
    /// `learned_ids`) with the groups read, merged into the index when the
    /// call returns it (storing while the call's views point into the lent
    /// arena would move what they point at).
    pub(super) learned: Vec<(Slot, EventView, u16)>,
    pub(super) learned_ids: Vec<Sym>,
}

impl<'py> Loaded<'py> {
    /// Completes `views` (this call's, taken from the batch with
    /// `objects`) at `positions` with the fields of `need`: from the index
    /// where the slot's object showed them before, read from the object
    /// otherwise. What is read of a bound object is stored when the call
    /// ends, so the next call on the session takes it from the index.
    pub fn complete(
        &mut self,
        objects: &[Bound<'py, PyAny>],
        views: &mut [EventView],
        positions: &[usize],
        need: Need,
    ) -> Extracted<()> {
        let need = normalized(need);
        let groups = groups_of(need);
        let index = match &self.checkout {
            Some((_, t)) if self.at.is_empty() => Some(t),
            _ => None,
        };
        let slot = |i: usize| self.slots.get(i).copied().filter(|&s| s != Slot::MAX);
        let mut todo = Vec::new();
        for &i in positions {
            match (index, slot(i)) {
                (Some(t), Some(s)) if t.core.verified(s) & groups == groups => {
                    let view = t.core.view_of_groups(s, objects[i].as_ptr() as u64, groups);
                    views[i] = pick(&views[i], &view, groups);
                }
                _ => todo.push(i),
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        registry().counters.completed += todo.len() as u64;
        let read: Vec<Bound<'py, PyAny>> = todo.iter().map(|&i| objects[i].clone()).collect();
        let read = self.ex.views(&read, need)?;
        for (&i, view) in todo.iter().zip(read.iter()) {
            views[i] = pick(&views[i], view, groups);
            if let (Some(_), Some(s)) = (index, slot(i)) {
                let view = copy_spans(view, &self.ex.ids, &mut self.learned_ids);
                self.learned.push((s, view, groups));
            }
        }
        Ok(())
    }

    /// The object at position `i` of the list, when taken.
    pub fn object(&self, i: usize) -> Option<&Bound<'py, PyAny>> {
        if self.at.is_empty() {
            return self.objects.get(i);
        }
        let k = *self.at.get(i)?;
        self.objects.get(k as usize)
    }

    /// The slot each position's object is bound to, when every one is
    /// (the list went through the index and each event could be stored).
    pub fn bound_slots(&self) -> Option<&[Slot]> {
        let bound = self.checkout.is_some()
            && self.at.is_empty()
            && self.slots.len() == self.objects.len()
            && !self.slots.contains(&Slot::MAX);
        bound.then_some(&self.slots[..])
    }

    /// Positions in the list.
    pub fn len(&self) -> usize {
        if self.at.is_empty() {
            self.objects.len()
        } else {
            self.at.len()
        }
    }
}

/// The session index a call's result is remembered in: the call's own,
/// when its batch holds every item of the list (one taken in part, see
/// `memos::filter::filter_again`, names no list to remember).
pub(super) fn memo_index<'a>(
    checkout: &'a mut Option<(Box<str>, Tracked)>,
    at: &[u32],
) -> Option<&'a mut Tracked> {
    if !at.is_empty() {
        return None;
    }
    checkout.as_mut().map(|(_, t)| t)
}

impl Drop for Loaded<'_> {
    fn drop(&mut self) {
        let Some((key, mut tracked)) = self.checkout.take() else {
            return;
        };
        tracked.core.restore_arena(std::mem::take(&mut self.ex.ids));
        tracked.interner = std::mem::take(&mut self.ex.interner);
        let mut changed = 0;
        for (slot, view, groups) in self.learned.drain(..) {
            // Not storable: left unconfirmed, read again next time.
            if let Ok(true) = tracked.core.merge(slot, &view, groups, &self.learned_ids) {
                // As in `resolve`: what the object showed replaces what
                // another object of its id showed before.
                tracked.forget_values(slot);
                tracked.generation += 1;
                changed += 1;
            }
        }
        if changed > 0 {
            registry().counters.changed += changed;
        }
        checkin(key, tracked);
    }
}

/// Reads `events` (exactly a `list`) for an operation that needs `need`:
/// through the session's index when enabled and every event can be stored,
/// otherwise directly.
pub fn load<'py>(events: &Bound<'py, PyAny>, need: Need) -> Extracted<Loaded<'py>> {
    load_with(events, need, true)
}

/// [`load`] for the source list of call recovery, which `_get_contents`
/// passes right after filtering it: objects the filtering call read
/// directly (seen once) are read directly again instead of being bound.
/// The several model calls of an invocation still bind them at the next
/// filtering call, while an invocation with one model call (a database
/// service's fresh Events, used once) never pays for binding.
pub fn load_source<'py>(events: &Bound<'py, PyAny>, need: Need) -> Extracted<Loaded<'py>> {
    load_with(events, need, false)
}

fn load_with<'py>(
    events: &Bound<'py, PyAny>,
    need: Need,
    bind_seen: bool,
) -> Extracted<Loaded<'py>> {
    let py = events.py();
    let list = Extractor::list(events)?;
    if let Some(key) = session_key(list)? {
        if let Some(tracked) = checkout(&key) {
            let mut tracked = tracked;
            if !tracked.worth_indexing(list, bind_seen) {
                // Objects seen neither now nor in the last call: most
                // likely read once (a copy made for one call); binding
                // them would cost more than reading them.
                checkin(key, tracked);
                registry().counters.direct += 1;
                return direct(list, need);
            }
            let mut ex = Extractor::with_interner(py, std::mem::take(&mut tracked.interner))?;
            ex.interner.begin_call();
            match resolve(&mut tracked, &mut ex, list, normalized(need)) {
                Ok((objects, views, slots, counts)) => {
                    ex.ids = tracked.core.take_arena();
                    registry().counters.add(&counts);
                    return Ok(Loaded {
                        objects,
                        views,
                        ex,
                        slots,
                        at: Vec::new(),
                        checkout: Some((key, tracked)),
                        learned: Vec::new(),
                        learned_ids: Vec::new(),
                    });
                }
                Err(outcome) => {
                    tracked.interner = std::mem::take(&mut ex.interner);
                    tracked.core.end_call();
                    checkin(key, tracked);
                    if let Outcome::Error(err) = outcome {
                        return Err(Outcome::Error(err));
                    }
                    // Some event cannot be stored: this call goes without
                    // the index (it declines there only if the operation
                    // itself cannot take the input).
                    registry().counters.fallbacks += 1;
                }
            }
        }
    }
    direct(list, need)
}

/// Reads `list` without the index.
fn direct<'py>(list: &Bound<'py, PyList>, need: Need) -> Extracted<Loaded<'py>> {
    let mut ex = Extractor::new(list.py())?;
    // About one distinct id per few events (invocations; call ids where
    // the parts are read): room for them without growing step by step.
    ex.interner.reserve(list.len() / 4);
    let batch = ex.batch(list, need)?;
    Ok(Loaded {
        objects: batch.objects,
        views: batch.views,
        ex,
        slots: Vec::new(),
        at: Vec::new(),
        checkout: None,
        learned: Vec::new(),
        learned_ids: Vec::new(),
    })
}

/// What becomes of an item the identity pass did not settle.
enum Pending {
    /// Bound to its slot already; read the groups not yet confirmed.
    Confirm(Slot),
    /// Known id, another object: bind to the slot, read and merge.
    Rebind(Slot),
    /// Unknown id (its key): read and store.
    Insert(u64),
    /// A known id whose slot another object of this call holds: read, not
    /// stored.
    Transient,
}

type Resolution<'py> = (Vec<Bound<'py, PyAny>>, Views, Vec<Slot>, Counters);

fn resolve<'py>(
    t: &mut Tracked,
    ex: &mut Extractor<'py>,
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Resolution<'py>> {
    let py = list.py();
    let groups = groups_of(need);
    // The identity pass below then asks no weak reference while nothing died.
    t.settle();
    let objects: Vec<Bound<'py, PyAny>> = crate::py::reading::prefetch::list_items(list);
    let n = objects.len();
    let mut counts = Counters::default();
    let mut slots: Vec<Slot> = vec![Slot::MAX; n];
    let mut pending: Vec<(usize, Pending)> = Vec::new();
    let mut unplaced: Vec<usize> = Vec::new();
    // Identity pass. Consecutive items are usually consecutive slots, so
    // the next slot is tried before the address map.
    let mut next: usize = 0;
    for (i, obj) in objects.iter().enumerate() {
        match t.slot_of_object(obj.as_ptr(), next) {
            Some(s) => {
                slots[i] = s;
                next = s as usize + 1;
                counts.by_identity += 1;
                if t.core.verified(s) & groups != groups {
                    pending.push((i, Pending::Confirm(s)));
                }
            }
            None => unplaced.push(i),
        }
    }
    if !unplaced.is_empty() {
        // Slots held by objects of this call.
        let mut claimed = vec![false; t.core.len()];
        for &s in &slots {
            if s != Slot::MAX {
                claimed[s as usize] = true;
            }
        }
        // Id pass, staged over chunks like extraction (each stage's
        // pointer chases are independent, so their cache misses overlap).
        let mut dicts: Vec<Bound<'py, PyDict>> = Vec::with_capacity(CHUNK);
        for chunk in unplaced.chunks(CHUNK) {
            dicts.clear();
            for &i in chunk {
                dicts.push(event_dict(&objects[i])?.ok_or(Outcome::Decline("not an Event"))?);
            }
            for (&i, dict) in chunk.iter().zip(&dicts) {
                let id = dict
                    .get_item(intern!(py, "id"))?
                    .ok_or(Outcome::Decline("id"))?
                    .cast_into_exact::<PyString>()
                    .map_err(|_| Outcome::Decline("id"))?;
                let key = id_key(id.to_str().map_err(|_| Outcome::Decline("id"))?);
                let p = match t.core.slot_of_id(key) {
                    Some(s) if claimed[s as usize] => Pending::Transient,
                    Some(s) => {
                        claimed[s as usize] = true;
                        Pending::Rebind(s)
                    }
                    None => Pending::Insert(key),
                };
                pending.push((i, p));
            }
        }
    }
    if pending.is_empty() {
        let views = views_of(&t.core, &objects, &slots, &[], groups);
        return Ok((objects, views, slots, counts));
    }
    let inserts = pending
        .iter()
        .filter(|(_, p)| matches!(p, Pending::Insert(_)))
        .count();
    if inserts > 0 {
        t.reserve(inserts);
    }
    // Read everything that needs reading in one staged pass.
    let to_read: Vec<Bound<'py, PyAny>> =
        pending.iter().map(|(i, _)| objects[*i].clone()).collect();
    let read = ex.views(&to_read, need)?;
    let scratch = std::mem::take(&mut ex.ids);
    let mut transients: Vec<(usize, EventView)> = Vec::new();
    for ((i, p), &view) in pending.into_iter().zip(read.iter()) {
        let obj = &objects[i];
        let addr = obj.as_ptr() as usize;
        let storable = |_| Outcome::Decline("not storable");
        match p {
            Pending::Confirm(slot) => {
                if t.core
                    .merge(slot, &view, groups, &scratch)
                    .map_err(storable)?
                {
                    t.forget_values(slot);
                    t.generation += 1;
                    counts.changed += 1;
                }
            }
            Pending::Rebind(slot) => {
                t.bind(slot, obj, false)?;
                if t.core
                    .merge(slot, &view, groups, &scratch)
                    .map_err(storable)?
                {
                    t.generation += 1;
                    counts.changed += 1;
                }
                slots[i] = slot;
                counts.by_id += 1;
            }
            Pending::Insert(key) => {
                // The same new id twice in this call: the first is stored.
                if t.core.slot_of_id(key).is_some() {
                    transients.push((i, view));
                    counts.transient += 1;
                    continue;
                }
                let slot = t
                    .core
                    .insert(key, addr, &view, groups, &scratch)
                    .map_err(storable)?;
                let watched = t.watch(obj)?;
                t.primary.push(Some(watched));
                t.strong.push(false);
                slots[i] = slot;
                counts.read += 1;
            }
            Pending::Transient => {
                transients.push((i, view));
                counts.transient += 1;
            }
        }
    }
    // Transient views go into the arena past the stored ones.
    let extra: Vec<(usize, EventView)> = transients
        .into_iter()
        .map(|(i, view)| (i, t.core.transient(&view, &scratch)))
        .collect();
    let views = views_of(&t.core, &objects, &slots, &extra, groups);
    Ok((objects, views, slots, counts))
}

/// The views of a call: stored views, with the fields of other groups at
/// their defaults (as a direct read leaves them), and transient ones.
fn views_of(
    core: &EventIndex,
    objects: &[Bound<'_, PyAny>],
    slots: &[Slot],
    extra: &[(usize, EventView)],
    groups: u16,
) -> Views {
    let mut views = Views::with_capacity(slots.len());
    views.extend(slots.iter().zip(objects).map(|(&s, obj)| {
        if s == Slot::MAX {
            EventView::default()
        } else {
            core.view_of_groups(s, obj.as_ptr() as u64, groups)
        }
    }));
    for &(i, view) in extra {
        views[i] = EventView {
            ident: objects[i].as_ptr() as u64,
            ..view
        };
    }
    views
}

/// Resolves `list[known..]` as any call resolves its list (new events read
/// and stored, known ones confirmed), for extending a remembered result:
/// `None` when that changed what a slot stores or left an item unbound. (An
/// object of a known id may take its slot from a prefix object: the views
/// are the same, so is the result; the next call finds the prefix object
/// unbound and computes.)
pub(super) fn resolve_tail<'py>(
    t: &mut Tracked,
    list: &Bound<'py, PyList>,
    known: usize,
    need: Need,
) -> Option<(Vec<Bound<'py, PyAny>>, Views, Vec<Slot>)> {
    let tail = list.get_slice(known, list.len());
    let generation = t.generation;
    let mut ex = Extractor::taking_interner(list.py(), &mut t.interner).ok()?;
    ex.interner.begin_call();
    let resolved = resolve(t, &mut ex, &tail, normalized(need));
    t.interner = std::mem::take(&mut ex.interner);
    t.core.end_call();
    let (objects, views, slots, counts) = resolved.ok()?;
    registry().counters.add(&counts);
    if t.generation != generation || slots.contains(&Slot::MAX) {
        return None;
    }
    Some((objects, views, slots))
}

/// The items of `list` after the objects `seen`, read with `need` and
/// bound, when it begins with them (see `Tracked::begins`); `None` when it
/// does not or a new item could not be bound (see [`resolve_tail`]).
#[allow(clippy::type_complexity)]
pub(super) fn new_items<'py>(
    t: &mut Tracked,
    seen: &mut Seen,
    list: &Bound<'py, PyList>,
    need: Need,
) -> Option<(Vec<Bound<'py, PyAny>>, Views, Vec<Slot>)> {
    if !t.begins(seen, list) {
        return None;
    }
    if list.len() == seen.len() {
        return Some((Vec::new(), Views::default(), Vec::new()));
    }
    resolve_tail(t, list, seen.len(), need)
}

/// The session's index `t`, checked out under `key`, lent to a call on
/// `list` answered from a remembered result naming `items` (over the list's
/// `slots`): only the items the result names are taken (raw events handed
/// back, compaction events whose summaries are handed out); the others,
/// most of a compacted session, stay untouched, `None` in their place. No
/// Python code ran since the result's list was compared with `list`, so the
/// list still holds what it compared.
pub(super) fn taken<'py>(
    list: &Bound<'py, PyList>,
    key: Box<str>,
    mut t: Tracked,
    slots: Vec<Slot>,
    items: &[Item],
) -> Extracted<Loaded<'py>> {
    let mut ex = match Extractor::taking_interner(list.py(), &mut t.interner) {
        Ok(ex) => ex,
        Err(err) => {
            checkin(key, t);
            return Err(err.into());
        }
    };
    ex.interner.begin_call();
    ex.ids = t.core.take_arena();
    let mut needed: Vec<usize> = items
        .iter()
        .map(|&(Item::Raw(i) | Item::Summary(i))| i)
        .collect();
    needed.sort_unstable();
    needed.dedup();
    let (objects, at) = crate::py::reading::prefetch::list_items_where(list, &needed);
    Ok(Loaded {
        objects,
        views: Views::default(),
        ex,
        slots,
        at,
        checkout: Some((key, t)),
        learned: Vec::new(),
        learned_ids: Vec::new(),
    })
}

/// The [`Need`] that reads field groups `groups` (the inverse of
/// [`groups_of`]).
pub(super) fn need_of(groups: u16) -> Need {
    let has = |bit| groups & bit != 0;
    Need {
        timestamp: has(group::TIMESTAMP),
        invocation: has(group::INVOCATION),
        window: has(group::WINDOW),
        pairing: has(group::PAIRING) || has(group::HITL),
        usage: has(group::USAGE),
        compaction: has(group::COMPACTION),
        rewind: has(group::REWIND),
        parts: has(group::PARTS) || has(group::HITL),
    }
}

/// The [`group`]s a need reads.
pub(super) fn groups_of(need: Need) -> u16 {
    let mut g = 0;
    for (on, bit) in [
        (need.timestamp, group::TIMESTAMP),
        (need.invocation, group::INVOCATION),
        (need.window, group::WINDOW),
        (need.pairing, group::PAIRING),
        (need.usage, group::USAGE),
        (need.compaction, group::COMPACTION),
        (need.rewind, group::REWIND),
        (need.parts, group::PARTS),
        (need.parts && need.pairing, group::HITL),
    ] {
        if on {
            g |= bit;
        }
    }
    g
}

/// `need` as the index reads it: fields the extractor reads only in part
/// or under a condition are read whole, so that what is stored does not
/// depend on which operation read it first (timestamps of every event, not
/// only of those with responses; invocation ids with the window checks).
pub(super) fn normalized(need: Need) -> Need {
    Need {
        timestamp: need.timestamp || need.parts,
        invocation: need.invocation || need.window,
        ..need
    }
}

/// The core's [`Reader`] over one call's objects and views: a field the
/// decision asks for is taken from the index where the slot's object
/// showed it, read from the object otherwise (see [`Loaded::complete`]).
pub struct Reading<'a, 'py> {
    pub loaded: &'a mut Loaded<'py>,
    pub objects: &'a [Bound<'py, PyAny>],
    pub views: &'a mut [EventView],
}

impl Reader for Reading<'_, '_> {
    type Error = Outcome;

    fn views(&self) -> &[EventView] {
        self.views
    }

    fn ids(&self) -> &[Sym] {
        &self.loaded.ex.ids
    }

    fn complete(&mut self, at: &[usize], need: Need) -> Extracted<()> {
        self.loaded.complete(self.objects, self.views, at, need)
    }

    fn detached<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        match self.objects.first() {
            Some(object) => object.py().detach(work),
            None => work(),
        }
    }
}
