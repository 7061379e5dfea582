//! Answers from a session's last call: when a call's list is the last one's
//! objects plus events that change nothing before them, each operation's
//! last result is extended over the new events instead of computed again.

use super::*;

/// `apply_rewinds` on `list` from the session's last one, without reading
/// or viewing the events it had: when `list` holds the last call's objects
/// (still bound to the same slots, over an unchanged index) followed by
/// events that carry no rewind (nothing before them changes, and they all
/// stay; they are resolved as any call resolves its list: new ones read and
/// stored), the surviving positions. `None`: compute.
pub fn rewinds_again(list: &Bound<'_, PyList>) -> Extracted<Option<Vec<u32>>> {
    remembered(list, |t| extend_rewinds(t, list), |c| c.rewinds_reused += 1)
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
            let memo = t.selection.as_ref()?;
            (memo.asked == *asked && memo.seen.unchanged(t, list)).then(|| memo.plan.clone())
        },
        |c| c.selections_reused += 1,
    )
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
            t.exact
                .iter()
                .find(|m| m.asked == asked && m.seen.unchanged(t, list))
                .map(|m| m.answer.clone())
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
            let k = t.exact.iter().position(|m| &m.asked == asked)?;
            let mut memo = t.exact.swap_remove(k);
            let a = memo.answer.clone();
            let whole = a.rewound.is_none() && a.scoped.is_none();
            let found = match (&a.coverage, whole && memo.seen.begin(t, list)) {
                (Some(c), true) => Some((memo.seen.len(), c.clone(), a.problems.clone())),
                _ => None,
            };
            t.exact.push(memo);
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

/// What `answer` makes of the index of `list`'s session (checked out for
/// it), when there is one and it answers; `count` notes that it did.
pub(super) fn remembered<T>(
    list: &Bound<'_, PyList>,
    answer: impl FnOnce(&mut Tracked) -> Option<T>,
    count: fn(&mut Counters),
) -> Extracted<Option<T>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let answered = answer(&mut t);
    checkin(key, t);
    if answered.is_some() {
        count(&mut registry().counters);
    }
    Ok(answered)
}

/// The compaction ranges of `list` from the session's last call: when
/// `list` holds the last call's objects (still bound to the same slots,
/// over an unchanged index) followed by new events (resolved as any call
/// resolves its list), the survivors of the last ranges and the new
/// events' (see [`survivors`]: the same as those of all the ranges).
pub fn ranges_again(list: &Bound<'_, PyList>) -> Extracted<Option<Vec<CompactionRange>>> {
    remembered(list, |t| extend_ranges(t, list), |c| c.ranges_reused += 1)
}

fn extend_ranges(t: &mut Tracked, list: &Bound<'_, PyList>) -> Option<Vec<CompactionRange>> {
    let mut memo = t.ranges.take()?;
    let known = memo.seen.len();
    let need = Need {
        compaction: true,
        ..Need::default()
    };
    let (objects, views, slots) = memo.seen.new_items(t, list, need)?;
    if !views.is_empty() {
        let mut ranges = std::mem::take(&mut memo.ranges);
        ranges.extend(views.iter().enumerate().filter_map(|(k, v)| {
            let (start, end) = v.compaction.and_then(|c| c.bounds())?;
            Some(CompactionRange {
                index: known + k,
                start,
                end,
            })
        }));
        memo.ranges = survivors(ranges);
        memo.seen.extend(&objects, &slots);
    }
    let ranges = memo.ranges.clone();
    t.ranges = Some(memo);
    Some(ranges)
}

/// The last recovery that re-injected something, when `events` and
/// `source` are the very lists it was computed from (the same objects at
/// every position, the source's still bound, over an unchanged index; the
/// filtered list's others held by the memo): its result, as positions.
pub fn recover_same(
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> Extracted<Option<Vec<Recovered>>> {
    remembered(
        source,
        |t| same_reinjection(t, events, source),
        |c| c.recoveries_reused += 1,
    )
}

fn same_reinjection(
    t: &mut Tracked,
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> Option<Vec<Recovered>> {
    let mut memo = t.reinjected.take()?;
    let py = events.py();
    let same = memo
        .held
        .iter()
        .all(|(o, state)| dict_state(o.bind(py)) == Some(*state))
        && source.len() == memo.source.len()
        && events.len() == memo.events.len()
        && starts_with(events, &memo.events)
        && memo.source.begin(t, source);
    let result = same.then(|| memo.result.clone());
    t.reinjected = Some(memo);
    result
}

/// Prompt filtering of `list` from the session's last one: when `list`
/// holds the last call's objects (still bound to the same slots, over an
/// unchanged index) followed by new events (resolved as any call resolves
/// its list), the last result followed by them where [`Extension::extend`]
/// accepts them (no compaction, uncovered, in order after the last item),
/// else merged into it ([`filter::extend_with_compactions`]); with the
/// items the result names loaded for materializing summaries (objects and
/// slots, no views).
pub fn filter_again<'py>(
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Option<(Loaded<'py>, Vec<Item>)>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let Some(items) = extend_filtered(&mut t, list, need) else {
        checkin(key, t);
        return Ok(None);
    };
    let slots = t
        .filtered
        .as_ref()
        .map(|m| m.seen.with(|_, slots| slots.to_vec()))
        .unwrap_or_default();
    registry().counters.filters_reused += 1;
    let loaded = taken(list, key, t, slots, &items)?;
    Ok(Some((loaded, items)))
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
    let mut needed = vec![false; list.len()];
    for &(Item::Raw(i) | Item::Summary(i)) in items {
        needed[i] = true;
    }
    let (objects, at) = crate::py::prefetch::list_items_where(list, &needed);
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

/// Exact mode's prompt items of `list` from the session's last ones, when
/// `list` holds exactly their objects (see [`exact_again`]), with the items
/// loaded for materializing summaries (see [`taken`]) and the records that
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
    let Some(k) = t.exact.iter().position(|m| m.asked == ExactAsked::Prompt) else {
        checkin(key, t);
        return Ok(None);
    };
    let mut memo = t.exact.swap_remove(k);
    if !memo.seen.unchanged(&t, list) && !extend_prompt(&mut t, &mut memo, list, need) {
        // Dropped: the call computes the prompt and remembers it anew.
        checkin(key, t);
        return Ok(None);
    }
    let (answer, slots) = (memo.answer.clone(), memo.seen.with(|_, s| s.to_vec()));
    t.exact.push(memo);
    registry().counters.exact_reused += 1;
    let items: Vec<Item> = answer.first.iter().map(|&i| decode_item(i)).collect();
    let loaded = taken(list, key, t, slots, &items)?;
    Ok(Some((loaded, items, answer.problems.clone())))
}

/// Extends the remembered exact-mode prompt `memo` to `list`, when `list`
/// holds its objects followed by raw events stamped in order from the
/// prompt's last sort key on: no compaction covers an event stored after
/// it, so they are raw and go last, in order.
fn extend_prompt(
    t: &mut Tracked,
    memo: &mut ExactMemo,
    list: &Bound<'_, PyList>,
    need: Need,
) -> bool {
    let known = memo.seen.len();
    let mut last = memo.answer.last;
    if !(last.is_finite() || last == f64::NEG_INFINITY) || list.len() >= SUMMARY_BIT as usize {
        return false;
    }
    let Some((objects, views, slots)) = memo.seen.new_items(t, list, need) else {
        return false;
    };
    for v in views.iter() {
        if v.compaction.is_some() || !v.timestamp.is_finite() || v.timestamp < last {
            return false;
        }
        last = v.timestamp;
    }
    memo.seen.extend(&objects, &slots);
    let mut first = memo.answer.first.clone();
    first.extend((known..known + views.len()).map(|i| encode_item(Item::Raw(i))));
    memo.answer = Arc::new(ExactAnswer {
        first,
        problems: memo.answer.problems.clone(),
        last,
        ..ExactAnswer::default()
    });
    true
}

fn extend_filtered(t: &mut Tracked, list: &Bound<'_, PyList>, need: Need) -> Option<Vec<Item>> {
    let mut memo = t.filtered.take()?;
    let known = memo.seen.len();
    let n = list.len();
    if n >= SUMMARY_BIT as usize {
        return None;
    }
    let (objects, views, slots) = memo.seen.new_items(t, list, need)?;
    if !views.is_empty() {
        if memo.extension.extend(&views) {
            memo.items.extend(known as u32..n as u32);
        } else {
            // A new compaction (or a tail event out of order or covered):
            // the result is computed from the last one and the tail, the
            // views of its items read from the index.
            let groups = group::TIMESTAMP | group::COMPACTION;
            let (items, extension) = memo.seen.with(|_, slots| {
                let view_of = |i: usize| t.core.view_of_groups(slots[i], 0, groups);
                filter::extend_with_compactions(&memo.items(), view_of, &views, known)
            })?;
            memo.items = items.iter().map(|&item| encode_item(item)).collect();
            memo.extension = extension;
        }
        memo.seen.extend(&objects, &slots);
    }
    let items = memo.items();
    t.filtered = Some(memo);
    Some(items)
}

/// Call recovery on `events` (the filtered list) and `source` from the
/// session's last one that re-injected nothing: true when it again
/// re-injects nothing, so `events` is the answer. That holds when `source`
/// holds the last call's source objects (still bound to the same slots,
/// over an unchanged index) followed by new events (resolved as any call
/// resolves its list), `events` holds the last filtered list (the same
/// source objects, and the cached summaries of the same slots, still
/// unchanged and holding neither calls nor responses) followed by some of
/// the new events in order, and [`Calls::extend`] finds no present
/// response of theirs whose latest call event is absent.
pub fn recover_again(events: &Bound<'_, PyList>, source: &Bound<'_, PyList>) -> Extracted<bool> {
    let again = remembered(
        source,
        |t| extend_recovered(t, events, source).then_some(()),
        |c| c.recoveries_reused += 1,
    )?;
    Ok(again.is_some())
}

fn extend_recovered(
    t: &mut Tracked,
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> bool {
    let Some(mut memo) = t.recovered.take() else {
        return false;
    };
    let py = events.py();
    let (known, listed) = (memo.source.len(), memo.events.len());
    if events.len() < listed
        || source.len() >= SUMMARY_BIT as usize
        || !memo.source.begin(t, source)
    {
        return false;
    }
    let listed_same = memo.source.with(|addrs, _| {
        memo.events.iter().enumerate().all(|(i, &entry)| {
            let ptr = list_item(events, i) as usize;
            if entry & SUMMARY_BIT == 0 {
                addrs[entry as usize] == ptr
            } else {
                t.plain_summary_view(entry & !SUMMARY_BIT, ptr as *mut ffi::PyObject, py)
                    .is_some()
            }
        })
    });
    if !listed_same {
        return false;
    }
    let need = Need {
        parts: true,
        ..Need::default()
    };
    let (objects, views, slots) = if source.len() > known {
        match resolve_tail(t, source, known, need) {
            Some(tail) => tail,
            None => return false,
        }
    } else {
        (Vec::new(), Views::default(), Vec::new())
    };
    if slots.iter().any(|&s| s <= memo.max_slot) {
        return false;
    }
    // The filtered list's new items: new source events, in order.
    let mut present = vec![false; objects.len()];
    let mut cursor = 0;
    for i in listed..events.len() {
        let ptr = list_item(events, i);
        match objects[cursor..].iter().position(|o| o.as_ptr() == ptr) {
            Some(k) => {
                present[cursor + k] = true;
                cursor += k + 1;
            }
            None => return false,
        }
    }
    if !memo.calls.extend(&views, &present, t.core.arena()) {
        return false;
    }
    memo.source.extend(&objects, &slots);
    memo.max_slot = slots.iter().copied().fold(memo.max_slot, Slot::max);
    memo.events.extend(
        present
            .iter()
            .enumerate()
            .filter(|(_, p)| **p)
            .map(|(k, _)| (known + k) as u32),
    );
    t.recovered = Some(memo);
    true
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

fn extend_rewinds(t: &mut Tracked, list: &Bound<'_, PyList>) -> Option<Vec<u32>> {
    let mut memo = t.rewinds.take()?;
    let known = memo.seen.len();
    let need = Need {
        rewind: true,
        invocation: true,
        ..Need::default()
    };
    let (objects, views, slots) = memo.seen.new_items(t, list, need)?;
    if views.iter().any(|v| v.rewind_before.is_some()) {
        return None;
    }
    memo.seen.extend(&objects, &slots);
    memo.kept.extend(known as u32..list.len() as u32);
    let kept = memo.kept.clone();
    t.rewinds = Some(memo);
    Some(kept)
}
