//! Deep copies of bound events (`index_copied`): binding them to their
//! source's slots, reading sources known by id only (`adopt`), and moving
//! the remembered results onto the copy (`carry`).

use super::load::{groups_of, need_of, normalized};
use super::memos::Carry;
use super::objects::{event_id, list_item, weak_ref_with, CopyHolder};
use super::registry::{checkin, checkout_existing, registry, session_key};
use super::seen::Seen;
use super::tracked::Tracked;
use crate::core::index::id_key;
use crate::core::slot_table::Slot;
use crate::py::error::{Extracted, Outcome};
use crate::py::reading::extract::Extractor;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

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
/// those of the stored originals, see `Origin::Primary`: nothing of a copy
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
    let holder = Bound::new(py, CopyHolder::new(t.deaths.clone()))?;
    let Ok(weak) = weak_ref_with(session, holder.as_any()) else {
        // A session that takes no weak reference: its copies go unbound.
        checkin(key, t);
        return Ok(());
    };
    holder.get().watch_session(weak);
    let holder_id = t.next_holder;
    t.next_holder += 1;
    t.holders.retain(|(_, h)| h.get().alive());
    let mut held: Vec<Py<PyAny>> = Vec::with_capacity(new.len());
    let event_type = crate::py::reading::extract::types(py)?
        .event
        .base()
        .bind(py)
        .clone();
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
        crate::py::reading::prefetch::prefetch(list_item(new, i));
    }
    for i in 0..old.len() {
        if i + AHEAD < new.len() {
            crate::py::reading::prefetch::prefetch(list_item(new, i + AHEAD));
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
        carry(&mut t, new, holder_id);
        t.share_records();
    }
    holder.get().hold(held);
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

/// The slot of the event `obj`'s `id` (an exact `Event` with a `str` id).
fn known_id(t: &Tracked, obj: &Bound<'_, PyAny>) -> PyResult<Option<Slot>> {
    let id = match event_id(obj) {
        Ok(Some(id)) => id,
        Ok(None) | Err(Outcome::Decline(_)) => return Ok(None),
        Err(Outcome::Error(err)) => return Err(err),
    };
    Ok(id
        .to_str()
        .ok()
        .and_then(|id| t.core.slot_of_id(id_key(id))))
}

/// Binds sources known by id only, with their copies: each source is read
/// in every field group its slot stores and merged (as the id path of a
/// call does, so a source that differs replaces what was stored), then
/// bound strongly (it is the stored original), its copy as second object.
/// Returns how many differed from what was stored.
fn adopt(
    t: &mut Tracked,
    misses: &[(Bound<'_, PyAny>, Bound<'_, PyAny>, Slot)],
    holder: u32,
    held: &mut Vec<Py<PyAny>>,
) -> Extracted<u64> {
    let py = misses[0].0.py();
    let groups = misses.iter().fold(0, |g, &(_, _, s)| g | t.core.known(s));
    let need = normalized(need_of(groups));
    let mut ex = Extractor::with_interner(py, std::mem::take(&mut t.interner))?;
    ex.interner.begin_call();
    let sources: Vec<Bound<'_, PyAny>> = misses.iter().map(|(o, _, _)| o.clone()).collect();
    let read = ex.views(&sources, need);
    let scratch = std::mem::take(&mut ex.ids);
    t.interner = std::mem::take(&mut ex.interner);
    let mut changed = 0;
    for ((o, n, s), &view) in misses.iter().zip(read?.iter()) {
        t.bind(*s, o, true)?;
        if t.core
            .merge(*s, &view, groups_of(need), &scratch)
            .map_err(|_| Outcome::Decline("not storable"))?
        {
            t.generation += 1;
            changed += 1;
        }
        bind_copy(t, *s, n, holder, held);
    }
    Ok(changed)
}

/// Moves the remembered results onto a session copy whose events were
/// just bound (by holder `holder`) to their sources' slots, as each says
/// (see [`Carry`]): same slots, same stored views, so the same results for
/// the copy's lists (recovery names its summaries by slot), and the
/// invocation's first calls are answered from them.
fn carry(t: &mut Tracked, new: &Bound<'_, PyList>, holder: u32) {
    let mut memos = t.take_memos();
    // The copies are bound (and held) now.
    let deaths = t.deaths();
    for memo in &mut memos {
        let how = memo.carry();
        if how == Carry::No {
            continue;
        }
        memo.each_seen_mut(&mut |seen| {
            let addrs = match how {
                Carry::Positional => (seen.generation == t.generation)
                    .then(|| seen.with(|_, slots| copies_at(t, new, slots, holder)))
                    .flatten(),
                Carry::BySlot => copies_of(t, seen, holder),
                Carry::No => None,
            };
            if let Some(addrs) = addrs {
                seen.carry(addrs, deaths);
            }
        });
    }
    t.keep_memos(memos);
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
