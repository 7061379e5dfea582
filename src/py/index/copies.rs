//! Deep copies of bound events (`index_copied`): binding them to their
//! source's slots, holding them while their session copy lives, and moving
//! the last results onto the copy.

use super::*;

/// The deep copies of one `index_copied` call, held strongly while the
/// session copy they belong to lives: an address can only be reused after
/// its object is freed, so while the holder is alive an object at a bound
/// copy's address is that copy, with no weak reference per event. The
/// holder is the callback of a weak reference to the copied session, so it
/// lets go of the copies when the session copy dies (during its
/// deallocation, where the copies would be freed anyway; not in our next
/// call).
#[pyclass(frozen)]
pub(super) struct CopyHolder {
    objects: Mutex<Vec<Py<PyAny>>>,
    pub(super) alive: AtomicBool,
    /// The session's `Tracked::deaths`, bumped when the copies are let go.
    deaths: Arc<AtomicU64>,
    /// The weak reference to the session copy, kept so the callback runs
    /// (CPython drops its reference to the callback once it ran).
    session: Mutex<Option<Py<PyAny>>>,
}

impl CopyHolder {
    pub(super) fn memory_bytes(&self) -> usize {
        let objects = self.objects.lock().map(|v| v.capacity()).unwrap_or(0);
        std::mem::size_of::<Self>() + objects * std::mem::size_of::<Py<PyAny>>() + 64
    }
}

#[pymethods]
impl CopyHolder {
    fn __call__(&self, _weak: &Bound<'_, PyAny>) {
        self.alive.store(false, Ordering::Release);
        self.deaths.fetch_add(1, Ordering::AcqRel);
        let objects = match self.objects.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        // The weak reference has fired: of no further use.
        let session = match self.session.lock() {
            Ok(mut w) => w.take(),
            Err(p) => p.into_inner().take(),
        };
        // Released with no lock held: freeing them may run callbacks.
        drop(objects);
        drop(session);
    }
}

/// The callback of a cached summary's weak reference to its compaction
/// event: when that event dies (a superseded session copy's, usually), the
/// summary goes with it, so what it holds (the copy's `actions` and
/// content) is freed with the copy and not by our next call. Skipped when
/// the registry is busy or the index checked out (the entry is then
/// replaced by the next call that builds the summary anew).
#[pyclass(frozen)]
pub(super) struct Reaper {
    pub(super) key: Box<str>,
    pub(super) slot: Slot,
}

#[pymethods]
impl Reaper {
    fn __call__(&self, weak: &Bound<'_, PyAny>) {
        let taken =
            match REGISTRY.try_lock() {
                Ok(mut reg) => reg.sessions.get_mut(&self.key).and_then(|t| {
                    match t.summaries.get(&self.slot) {
                        Some(s) if s.origin.as_ptr() == weak.as_ptr() => {
                            t.summaries.remove(&self.slot)
                        }
                        _ => None,
                    }
                }),
                Err(_) => None,
            };
        // Dropped with the registry unlocked: freeing it may run callbacks.
        drop(taken);
    }
}

/// The callback of the weak references to a session's weakly bound objects:
/// counts their deaths (`Tracked::deaths`). Only an atomic is touched: it
/// runs during deallocations, with or without the registry locked.
#[pyclass(frozen)]
pub(super) struct Obituary {
    pub(super) deaths: Arc<AtomicU64>,
}

#[pymethods]
impl Obituary {
    fn __call__(&self, _weak: &Bound<'_, PyAny>) {
        self.deaths.fetch_add(1, Ordering::AcqRel);
    }
}

/// A new weak reference to `obj` whose callback is `callback`.
pub(super) fn weak_ref_with(
    obj: &Bound<'_, PyAny>,
    callback: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    new_weak_ref(obj, callback.as_ptr())
}

/// Moves the last rewinds and recovery results onto a session copy: when
/// the copies at their positions in `new` (the session's list, which both
/// took as their source) were just bound (by holder `holder`) to their
/// slots, they name those copies instead (same slots, same stored views, so
/// the same results; recovery names its summaries by slot), and the
/// invocation's first calls are answered from them.
fn carry_positional(t: &mut Tracked, new: &Bound<'_, PyList>, holder: u32) {
    let generation = t.generation;
    let carried = |seen: &Seen| {
        (seen.generation == generation)
            .then(|| seen.with(|_, slots| copies_at(t, new, slots, holder)))
            .flatten()
    };
    let rewinds = t.rewinds.as_ref().and_then(|m| carried(&m.seen));
    let recovered = t.recovered.as_ref().and_then(|m| carried(&m.source));
    let ranges = t.ranges.as_ref().and_then(|m| carried(&m.seen));
    // The copies are bound (and held) now.
    let deaths = t.deaths();
    if let (Some(memo), Some(addrs)) = (t.rewinds.as_mut(), rewinds) {
        memo.seen.carry(addrs, deaths);
    }
    if let (Some(memo), Some(addrs)) = (t.recovered.as_mut(), recovered) {
        memo.source.carry(addrs, deaths);
    }
    if let (Some(memo), Some(addrs)) = (t.ranges.as_mut(), ranges) {
        memo.seen.carry(addrs, deaths);
    }
}

/// The addresses of `new`'s first items when each is the copy of the
/// object at its position that holder `holder` bound to the slot `slots`
/// names there.
fn copies_at(
    t: &Tracked,
    new: &Bound<'_, PyList>,
    slots: &[Slot],
    holder: u32,
) -> Option<Vec<usize>> {
    if slots.len() > new.len() {
        return None;
    }
    let mut addrs = Vec::with_capacity(slots.len());
    for (j, &slot) in slots.iter().enumerate() {
        let ptr = list_item(new, j) as usize;
        if ptr == 0
            || t.core.alias(slot) != ptr
            || t.alias_holder.get(slot as usize) != Some(&holder)
        {
            return None;
        }
        addrs.push(ptr);
    }
    Some(addrs)
}

/// Moves the last filtering result onto a session copy: when every slot it
/// names had its copy bound just now (by holder `holder`), it names those
/// copies instead (same slots, same stored views, so the same result for
/// the copy's list of them), and the invocation's first filtering call is
/// answered from it.
fn carry_filtered(t: &mut Tracked, holder: u32) {
    let Some(memo) = t.filtered.as_ref() else {
        return;
    };
    if let Some(addrs) = copies_of(t, &memo.seen, holder) {
        let deaths = t.deaths();
        if let Some(memo) = t.filtered.as_mut() {
            memo.seen.carry(addrs, deaths);
        }
    }
}

/// Moves exact mode's last answers onto a session copy, as
/// [`carry_filtered`] moves the filtering result: each names the copies of
/// its slots when every one had its copy bound just now by `holder`.
fn carry_exact(t: &mut Tracked, holder: u32) {
    let carried: Vec<Option<Vec<usize>>> = t
        .exact
        .iter()
        .map(|m| copies_of(t, &m.seen, holder))
        .collect();
    let deaths = t.deaths();
    for (memo, addrs) in t.exact.iter_mut().zip(carried) {
        if let Some(addrs) = addrs {
            memo.seen.carry(addrs, deaths);
        }
    }
}

/// The addresses of the copies bound just now (by `holder`) to every slot
/// `seen` names, when each had one, over an unchanged index.
fn copies_of(t: &Tracked, seen: &Seen, holder: u32) -> Option<Vec<usize>> {
    if seen.generation != t.generation {
        return None;
    }
    seen.with(|_, slots| {
        let mut addrs = Vec::with_capacity(slots.len());
        for &slot in slots {
            let ptr = t.core.alias(slot);
            if ptr == 0 || t.alias_holder.get(slot as usize) != Some(&holder) {
                return None;
            }
            addrs.push(ptr);
        }
        Some(addrs)
    })
}

/// Binds the deep copies in `new` to the slots of the objects in `old` they
/// were copied from, position by position (`Session.__deepcopy__` calls
/// this after copying a session's events, see `_patch`). A deep copy equals
/// its source in every field when made, so it inherits what the source
/// showed without being read; the source stays bound (held strongly from
/// then on: it is the stored original copied for every invocation). The
/// copies are held by a [`CopyHolder`] until `session`, the session copy
/// holding `new`, dies. Sources the index knows by id only are read and
/// bound (see [`adopt`]); others are left alone, and so is anything but two
/// lists of one length holding exact `Event`s. (The copies' summaries are
/// those of the stored originals, see [`Origin::Primary`]: nothing of a copy
/// is read for them.)
#[pyfunction]
pub fn index_copied(
    old: &Bound<'_, PyAny>,
    new: &Bound<'_, PyAny>,
    session: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let start = std::time::Instant::now();
    let (Ok(old), Ok(new)) = (old.cast_exact::<PyList>(), new.cast_exact::<PyList>()) else {
        return Ok(());
    };
    if old.len() != new.len() {
        return Ok(());
    }
    let key = match session_key(old) {
        Ok(Some(key)) => key,
        Ok(None) | Err(Outcome::Decline(_)) => return Ok(()),
        Err(Outcome::Error(err)) => return Err(err),
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(());
    };
    let py = old.py();
    let holder = Bound::new(
        py,
        CopyHolder {
            objects: Mutex::new(Vec::new()),
            alive: AtomicBool::new(true),
            deaths: t.deaths.clone(),
            session: Mutex::new(None),
        },
    )?;
    let Ok(weak) = weak_ref_with(session, holder.as_any()) else {
        // A session that takes no weak reference: its copies go unbound.
        checkin(key, t);
        return Ok(());
    };
    if let Ok(mut w) = holder.get().session.lock() {
        *w = Some(weak);
    }
    let holder_id = t.next_holder;
    t.next_holder += 1;
    t.holders
        .retain(|(_, h)| h.get().alive.load(Ordering::Acquire));
    let mut held: Vec<Py<PyAny>> = Vec::with_capacity(new.len());
    let event_type = crate::py::extract::types(py)?.event.base().bind(py).clone();
    let mut copied = 0;
    let mut adopted = 0;
    let mut changed = 0;
    let mut next = 0;
    let mut pairs: Vec<(Slot, usize)> = Vec::with_capacity(new.len());
    let mut claimed = vec![false; t.core.len()];
    let mut claim = |s: Slot| !std::mem::replace(&mut claimed[s as usize], true);
    // Sources the index knows by id only: events first seen as copies (a
    // compaction event google-adk appends after the invocation's last
    // model call is first read in the next invocation's copy).
    let mut misses: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>, Slot)> = Vec::new();
    let mut result = Ok(());
    // The stored originals are read by address only (the session keeps
    // them, and nothing below runs Python code that could change the
    // lists): they are not touched unless known by id only. Their copies
    // are touched once, to be held.
    let event_type = event_type.as_ptr().cast::<ffi::PyTypeObject>();
    // The copies were made just now but are cold again (the deep copy
    // went through megabytes since): their loads are started some items
    // ahead so that the misses overlap.
    const AHEAD: usize = 16;
    for i in 0..AHEAD.min(new.len()) {
        crate::py::prefetch::prefetch(list_item(new, i));
    }
    for i in 0..old.len() {
        if i + AHEAD < new.len() {
            crate::py::prefetch::prefetch(list_item(new, i + AHEAD));
        }
        let (o, n) = (list_item(old, i), list_item(new, i));
        // SAFETY: `n` is a live item of `new` (borrowed from it).
        if n.is_null() || unsafe { ffi::Py_TYPE(n) } != event_type {
            continue;
        }
        // SAFETY: both are live items of their lists, borrowed.
        let (o, n) = unsafe { (Borrowed::from_ptr(py, o), Borrowed::from_ptr(py, n)) };
        let Some(s) = t.slot_of_object(o.as_ptr(), next) else {
            match known_id(&t, &o) {
                Ok(Some(s)) if claim(s) => misses.push((o.to_owned(), n.to_owned(), s)),
                Ok(_) => {}
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
            continue;
        };
        claim(s);
        next = s as usize + 1;
        let k = s as usize;
        let primary = t.core.ptr(s) == o.as_ptr() as usize;
        if primary && !t.strong[k] {
            t.primary[k] = Some(o.to_owned().unbind());
            t.strong[k] = true;
        }
        pairs.push((s, n.as_ptr() as usize));
        held.push(n.to_owned().unbind());
        copied += 1;
    }
    // Bound at once: see `EventIndex::bind_aliases`.
    if t.alias_holder.len() < t.core.len() {
        t.alias_holder.resize(t.core.len(), 0);
    }
    for &(s, _) in &pairs {
        t.alias_holder[s as usize] = holder_id;
    }
    let stale_firsts = (0..t.core.len())
        .any(|k| t.core.ptr(k as Slot) != 0 && !(t.strong[k] && t.primary[k].is_some()));
    t.core.bind_aliases(&pairs, stale_firsts);
    if result.is_ok() && !misses.is_empty() {
        match adopt(&mut t, &misses, holder_id, &mut held) {
            Ok(c) => {
                adopted = misses.len() as u64;
                changed = c;
            }
            // The index may be half updated: it is dropped, not kept.
            Err(Outcome::Decline(_)) => {
                registry().counters.fallbacks += 1;
                return Ok(());
            }
            Err(Outcome::Error(err)) => return Err(err),
        }
    }
    if result.is_ok() {
        carry_positional(&mut t, new, holder_id);
        carry_filtered(&mut t, holder_id);
        carry_exact(&mut t, holder_id);
        t.share_records();
    }
    if let Ok(mut objects) = holder.get().objects.lock() {
        *objects = held;
    }
    t.holders.push((holder_id, holder.unbind()));
    checkin(key, t);
    let mut reg = registry();
    reg.counters.copied += copied + adopted;
    reg.counters.by_id += adopted;
    reg.counters.changed += changed;
    reg.counters.copy_nanos += start.elapsed().as_nanos() as u64;
    result
}

/// Binds the deep copy `n` as the second object of slot `s`, held by
/// holder number `holder` (`n` is added to `held`, which goes to it).
pub(super) fn bind_copy(
    t: &mut Tracked,
    s: Slot,
    n: &Bound<'_, PyAny>,
    holder: u32,
    held: &mut Vec<Py<PyAny>>,
) {
    let k = s as usize;
    if t.alias_holder.len() <= k {
        t.alias_holder.resize(t.core.len(), 0);
    }
    t.alias_holder[k] = holder;
    t.core.bind_alias(s, n.as_ptr() as usize);
    held.push(n.clone().unbind());
}
