//! Which events are live after rewinds (`_apply_rewinds`).

use super::event::{per_symbol, EventView};

/// Indices of the events that survive every rewind, in chronological order.
///
/// Walks backwards; an event carrying `rewind_before` for invocation X is
/// dropped together with everything back to the first event of X (when X
/// occurs earlier), then the walk resumes before it. Rewinds to unknown or
/// later invocations drop only the rewind event itself.
pub fn apply_rewinds(events: &[EventView]) -> Vec<usize> {
    // The first event of each invocation, by symbol.
    let mut first_by_invocation: Option<Vec<u32>> = None;
    let mut kept = Vec::with_capacity(events.len());
    let mut i = events.len();
    while i > 0 {
        i -= 1;
        match events[i].rewind_before {
            Some(target) => {
                let first = first_by_invocation.get_or_insert_with(|| {
                    let mut first =
                        per_symbol(events.iter().filter_map(|e| e.invocation), u32::MAX);
                    for (idx, ev) in events.iter().enumerate().rev() {
                        if let Some(inv) = ev.invocation {
                            first[inv as usize] = idx as u32;
                        }
                    }
                    first
                });
                if let Some(&idx) = first.get(target as usize).filter(|&&k| k != u32::MAX) {
                    if (idx as usize) < i {
                        i = idx as usize;
                    }
                }
            }
            None => kept.push(i),
        }
    }
    kept.reverse();
    kept
}

/// Extends `kept`, the result of [`apply_rewinds`] on some events, to them
/// followed by `tail` (numbered from `offset`), when no tail event carries a
/// rewind: nothing before them changes and they all stay. `false` (and
/// `kept` untouched) when one does: the result must be computed.
pub fn extend_kept(kept: &mut Vec<u32>, offset: usize, tail: &[EventView]) -> bool {
    if tail.iter().any(|v| v.rewind_before.is_some()) {
        return false;
    }
    kept.extend(offset as u32..(offset + tail.len()) as u32);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Sym;

    fn ev(inv: Sym, rewind: Option<Sym>) -> EventView {
        EventView {
            invocation: Some(inv),
            rewind_before: rewind,
            ..Default::default()
        }
    }

    #[test]
    fn no_rewind_keeps_everything() {
        let events = vec![ev(1, None), ev(2, None)];
        assert_eq!(apply_rewinds(&events), vec![0, 1]);
    }

    #[test]
    fn rewind_drops_back_to_first_event_of_target() {
        let events = vec![
            ev(1, None),
            ev(2, None),
            ev(2, None),
            ev(3, None),
            ev(4, Some(2)),
        ];
        assert_eq!(apply_rewinds(&events), vec![0]);
    }

    #[test]
    fn rewind_to_unknown_or_later_invocation_drops_only_itself() {
        let events = vec![
            ev(1, None),
            ev(2, Some(9)),
            ev(3, None),
            ev(4, Some(5)),
            ev(5, None),
        ];
        assert_eq!(apply_rewinds(&events), vec![0, 2, 4]);
    }

    #[test]
    fn rewind_of_own_invocation_drops_its_earlier_events() {
        // The rewind event itself belongs to invocation 2, whose first event
        // is at index 1: everything from there is dropped.
        let events = vec![ev(1, None), ev(2, None), ev(2, Some(2)), ev(3, None)];
        assert_eq!(apply_rewinds(&events), vec![0, 3]);
    }

    #[test]
    fn extending_keeps_a_tail_without_rewinds_and_declines_one_with() {
        let events = vec![ev(1, None), ev(2, None), ev(3, Some(2))];
        let mut kept: Vec<u32> = apply_rewinds(&events).iter().map(|&i| i as u32).collect();
        assert!(extend_kept(&mut kept, 3, &[ev(4, None), ev(4, None)]));
        assert_eq!(kept, vec![0, 3, 4]);
        assert!(!extend_kept(&mut kept, 5, &[ev(5, None), ev(6, Some(1))]));
        assert_eq!(kept, vec![0, 3, 4]);
    }

    #[test]
    fn nested_rewinds_resume_before_the_target() {
        let events = vec![
            ev(1, None),
            ev(2, None),
            ev(3, Some(2)),
            ev(4, None),
            ev(5, Some(4)),
        ];
        assert_eq!(apply_rewinds(&events), vec![0]);
    }
}
