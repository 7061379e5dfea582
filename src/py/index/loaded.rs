//! A call's list resolved against its session's index (`load`): the
//! identity pass, reading what is new or changed, and the views handed to
//! the core.

use super::*;
use crate::core::select::Reader;

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
    /// [`filter_again`]).
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

    /// The summaries this session's index holds, by the address of the
    /// summary Event (held by the cache, so the address names it).
    pub fn summaries_by_address(&self) -> FastMap<usize, Slot> {
        match &self.checkout {
            Some((_, t)) => t
                .summaries
                .iter()
                .map(|(&slot, s)| (s.event.as_ptr() as usize, slot))
                .collect(),
            None => FastMap::default(),
        }
    }

    /// The call-recovery view of the cached summary of slot `slot`, `obj`
    /// itself, read with `need` unless its content is the one it was cached
    /// with and the slot's summaries are known to hold neither calls nor
    /// responses (see `Tracked::plain`; objects are trusted not to change
    /// in place, as everywhere in the index).
    pub fn summary_view(
        &mut self,
        slot: Slot,
        obj: &Bound<'py, PyAny>,
        need: Need,
    ) -> Extracted<EventView> {
        if let Some(view) = self
            .checkout
            .as_ref()
            .and_then(|(_, t)| t.plain_summary_view(slot, obj.as_ptr(), obj.py()))
        {
            return Ok(EventView {
                ident: obj.as_ptr() as u64,
                ..*view
            });
        }
        let content = obj.getattr(intern!(obj.py(), "content"))?;
        let cached = |t: &Tracked| {
            t.summaries
                .get(&slot)
                .is_some_and(|s| s.content.is(&content))
        };
        if let Some((_, t)) = &self.checkout {
            if let Some(view) = t.plain.get(&slot).filter(|_| cached(t)) {
                return Ok(EventView {
                    ident: obj.as_ptr() as u64,
                    ..*view
                });
            }
        }
        let view = self.ex.event(obj, need)?;
        let plain = view.calls.len == 0 && view.responses.len == 0 && !view.has_responses;
        if let Some((_, t)) = &mut self.checkout {
            if cached(t) {
                if plain {
                    t.plain.insert(slot, view);
                } else {
                    t.plain.remove(&slot);
                }
            }
        }
        Ok(view)
    }

    /// What the summary of the compaction event at `i` of the list takes
    /// from the stored original its slot holds strongly (see
    /// [`Origin::Primary`]), when the event is that original or a deep copy
    /// of it bound to the slot: read from the original once per binding
    /// (`Tracked::sources`), never from a copy. `None` otherwise, or when
    /// a value is not of the type validation keeps as is.
    pub fn primary_values(
        &mut self,
        i: usize,
    ) -> PyResult<Option<summary::Source<Bound<'py, PyAny>>>> {
        let obj = self.object(i).cloned();
        let (Some((_, t)), Some(&slot), Some(obj)) = (&mut self.checkout, self.slots.get(i), obj)
        else {
            return Ok(None);
        };
        let py = obj.py();
        if slot == Slot::MAX || !t.bound(slot, obj.as_ptr()) {
            return Ok(None);
        }
        let Some(original) = t.primary_source(slot).map(|o| o.bind(py).clone()) else {
            return Ok(None);
        };
        let src = match t.sources.entry(slot) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => match summary::Source::read(&original)?
            {
                Some(src) => e.insert(src.unbind()),
                None => return Ok(None),
            },
        };
        Ok(Some(src.bind(py)))
    }

    /// Exact mode's coverage record of `obj`, the compaction event at `i`
    /// of the list, `parse`d off the stored original its slot holds strongly when
    /// the event is that original or a deep copy of it bound to the slot
    /// (once per binding, as [`Loaded::primary_values`] reads summaries'
    /// values: a session service deep-copies the originals for every
    /// invocation), off the event otherwise.
    pub fn record_at(
        &mut self,
        i: usize,
        obj: &Bound<'py, PyAny>,
        parse: impl Fn(&Bound<'py, PyAny>) -> PyResult<Parsed>,
    ) -> PyResult<Arc<Parsed>> {
        let (Some((_, t)), Some(&slot), true) =
            (&mut self.checkout, self.slots.get(i), self.at.is_empty())
        else {
            return parse(obj).map(Arc::new);
        };
        let py = obj.py();
        let original = match slot != Slot::MAX && t.bound(slot, obj.as_ptr()) {
            true => t.primary_source(slot).map(|o| o.bind(py).clone()),
            false => None,
        };
        let Some(original) = original else {
            return parse(obj).map(Arc::new);
        };
        if let Some(known) = t.records.get(&slot) {
            return Ok(known.clone());
        }
        let parsed = Arc::new(parse(&original)?);
        t.records.insert(slot, parsed.clone());
        Ok(parsed)
    }

    /// Starts loading what checking the cached summary of the compaction
    /// event at `i` of the list reads (see [`Loaded::cached_summary`]);
    /// issued some summaries ahead, so that their cache misses overlap.
    pub fn prefetch_summary(&self, i: usize) {
        if let Some(&slot) = self.slots.get(i) {
            self.prefetch_summary_of(slot);
        }
    }

    /// [`Loaded::prefetch_summary`] for the cached summary of slot `slot`.
    pub fn prefetch_summary_of(&self, slot: Slot) {
        if let Some(summary) = self
            .checkout
            .as_ref()
            .and_then(|(_, t)| t.summaries.get(&slot))
        {
            summary.prefetch();
        }
    }

    /// The summary handed out before for the compaction event at `i` of
    /// the list, when it, the event and the author are unchanged.
    pub fn cached_summary(
        &self,
        i: usize,
        author: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (Some((_, tracked)), Some(&slot)) = (&self.checkout, self.slots.get(i)) else {
            return Ok(None);
        };
        let Some(event) = self.object(i) else {
            return Ok(None);
        };
        match tracked.summaries.get(&slot) {
            Some(summary) if summary.valid(tracked, slot, event, author)? => {
                registry().counters.summaries_reused += 1;
                Ok(Some(summary.event.bind(author.py()).clone()))
            }
            _ => {
                registry().counters.summaries_built += 1;
                Ok(None)
            }
        }
    }

    /// Remembers `event` as the summary of the compaction event at `i`;
    /// returns its size in bytes (`summary_size`), measured unless `bytes`
    /// gives it (summaries built alike have one size), or `None` when it is
    /// not cached (its compaction event is not in the index).
    pub fn cache_summary(
        &mut self,
        i: usize,
        author: &Bound<'py, PyString>,
        event: &Bound<'py, PyAny>,
        bytes: Option<usize>,
        from_primary: bool,
    ) -> PyResult<Option<usize>> {
        let Some(compaction_event) = self.object(i).cloned() else {
            return Ok(None);
        };
        let (Some((key, tracked)), Some(&slot)) = (&mut self.checkout, self.slots.get(i)) else {
            return Ok(None);
        };
        if slot == Slot::MAX {
            return Ok(None);
        }
        let Some((dict, node)) = summary_dicts(event)? else {
            return Ok(None);
        };
        let Some(content) = dict.get_item(intern!(event.py(), "content"))? else {
            return Ok(None);
        };
        let unchanged = Unchanged::of(&dict, node.as_ref().map(|(_, d)| d));
        let origin = match tracked.primary_source(slot) {
            Some(original) if from_primary => Origin::Primary(original.clone_ref(event.py())),
            _ => {
                let reaper = Bound::new(
                    event.py(),
                    Reaper {
                        key: key.clone(),
                        slot,
                    },
                )?;
                Origin::Object(weak_ref_with(&compaction_event, reaper.as_any())?)
            }
        };
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => summary_size(event, node.as_ref(), unchanged.held())?,
        };
        tracked.summaries.insert(
            slot,
            Summary {
                bytes,
                origin,
                author: author.clone().unbind(),
                event: event.clone().unbind(),
                unchanged,
                content: content.unbind(),
                node: node.map(|(node, _)| node.unbind()),
            },
        );
        Ok(Some(bytes))
    }

    /// Remembers `items`, the result of prompt filtering on this call's
    /// list, and what extending it needs, for [`filter_again`] (when every
    /// item is bound and the list is short enough to number).
    pub fn remember_filter(&mut self, items: &[Item], extension: Extension) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.filtered = Seen::of(t, &self.objects, &self.slots)
            .filter(|_| self.objects.len() < SUMMARY_BIT as usize)
            .map(|seen| FilterMemo {
                seen,
                items: items.iter().map(|&item| encode_item(item)).collect(),
                extension,
            });
    }

    /// Whether what recovery knows of slot `slot`'s cached summary is that
    /// it holds neither calls nor responses (see `Tracked::plain`).
    pub fn plain_summary(&self, slot: Slot) -> bool {
        self.checkout
            .as_ref()
            .is_some_and(|(_, t)| t.plain.contains_key(&slot))
    }

    /// Remembers a recovery on this call's list (the source) that
    /// re-injected nothing, for [`recover_again`]: `events` says what each
    /// item of the filtered list was (see `RecoverMemo::events`). Not
    /// remembered when a source item is unbound or a present response's
    /// latest call is absent.
    pub fn remember_recovery(&mut self, events: Vec<u32>) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        // One recovery memo or the other: a call re-injects or it does not.
        t.recovered = None;
        t.reinjected = None;
        if self.slots.contains(&Slot::MAX) || self.objects.len() >= SUMMARY_BIT as usize {
            return;
        }
        let mut present = vec![false; self.views.len()];
        for &e in &events {
            if e & SUMMARY_BIT == 0 {
                present[e as usize] = true;
            }
        }
        let Some(calls) = Calls::of(&self.views, &present, &self.ex.ids) else {
            return;
        };
        t.recovered = Seen::of(t, &self.objects, &self.slots).map(|source| RecoverMemo {
            source,
            max_slot: self.slots.iter().copied().max().unwrap_or(0),
            events,
            calls,
        });
    }

    /// Remembers `ranges`, the result of `get_compaction_ranges` on this
    /// call's list, for [`ranges_again`] (when every item is bound).
    pub fn remember_ranges(&mut self, ranges: &[CompactionRange]) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.ranges = Seen::of(t, &self.objects, &self.slots).map(|seen| RangesMemo {
            seen,
            ranges: ranges.to_vec(),
        });
    }

    /// Remembers `result`, a recovery on this call's list (the source) and
    /// `events` (the filtered list) that re-injected something, for
    /// [`recover_same`] (when every source item is bound).
    pub fn remember_reinjection(
        &mut self,
        events: &[Bound<'py, PyAny>],
        in_source: &[bool],
        result: Vec<Recovered>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        // One recovery memo or the other: a call re-injects or it does not.
        t.reinjected = None;
        t.recovered = None;
        let Some(source) = Seen::of(t, &self.objects, &self.slots) else {
            return;
        };
        let mut held = Vec::new();
        for (o, _) in events.iter().zip(in_source).filter(|(_, &known)| !known) {
            // Not remembered where a dict's changes cannot be seen.
            let Some(state) = dict_state(o) else {
                return;
            };
            held.push((o.clone().unbind(), state));
        }
        t.reinjected = Some(ReinjectMemo {
            source,
            events: events.iter().map(|o| o.as_ptr() as usize).collect(),
            held,
            result,
        });
    }

    /// Remembers `plan`, the answer of a window selection asked `asked` on
    /// this call's list (`objects`, taken from the batch), for
    /// [`selection_again`] (when every item is bound).
    pub fn remember_selection(
        &mut self,
        objects: &[Bound<'_, PyAny>],
        asked: Asked,
        plan: Arc<Plan>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.selection =
            Seen::of(t, objects, &self.slots).map(|seen| SelectionMemo { seen, asked, plan });
    }

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
        let Some(seen) = Seen::of(t, objects, &self.slots) else {
            return;
        };
        t.exact.retain(|m| m.asked != asked);
        t.exact.push(ExactMemo {
            seen,
            asked,
            answer,
        });
    }

    /// Remembers `kept`, the result of `apply_rewinds` on this call's list,
    /// for [`rewinds_again`] (when every item is bound).
    pub fn remember_rewinds(&mut self, kept: &[usize]) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.rewinds = Seen::of(t, &self.objects, &self.slots).map(|seen| RewindsMemo {
            seen,
            kept: kept.iter().map(|&i| i as u32).collect(),
        });
    }
}

/// The session index a call's result is remembered in: the call's own,
/// when its batch holds every item of the list (one taken in part, see
/// [`filter_again`], names no list to remember).
fn memo_index<'a>(
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

pub(super) fn resolve<'py>(
    t: &mut Tracked,
    ex: &mut Extractor<'py>,
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Resolution<'py>> {
    let py = list.py();
    let groups = groups_of(need);
    // The identity pass below then asks no weak reference while nothing died.
    t.settle();
    let objects: Vec<Bound<'py, PyAny>> = crate::py::prefetch::list_items(list);
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
