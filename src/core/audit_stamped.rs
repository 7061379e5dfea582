//! What an exact-mode record stands for, found by timestamp search.

use crate::core::event::EventView;
use crate::core::exact::Extent;

/// The raw events and the compactions of a session by timestamp, for
/// what exact-mode records stand for: an interval's events are found by
/// search, not by a walk over every event stored before its compaction.
pub(super) struct Stamped {
    /// Raw events with a non-NaN timestamp, by timestamp.
    raw: Vec<usize>,
    /// Compactions with non-NaN bounds, start before end, by start.
    compactions: Vec<usize>,
    /// Those whose end is before their start (no start search finds them).
    inverted: Vec<usize>,
}

impl Stamped {
    pub(super) fn new(events: &[EventView]) -> Stamped {
        let mut raw: Vec<usize> = (0..events.len())
            .filter(|&p| events[p].compaction.is_none() && !events[p].timestamp.is_nan())
            .collect();
        raw.sort_by(|&a, &b| events[a].timestamp.total_cmp(&events[b].timestamp));
        let (mut compactions, mut inverted) = (Vec::new(), Vec::new());
        for (p, e) in events.iter().enumerate() {
            match e.compaction.and_then(|c| c.bounds()) {
                Some((s, e)) if s.is_nan() || e.is_nan() => {}
                Some((s, e)) if e < s => inverted.push(p),
                Some(_) => compactions.push(p),
                None => {}
            }
        }
        let start = |p: usize| {
            let bounds = events[p].compaction.and_then(|c| c.bounds());
            bounds.map_or(f64::NAN, |(s, _)| s)
        };
        compactions.sort_by(|&a, &b| start(a).total_cmp(&start(b)));
        Stamped {
            raw,
            compactions,
            inverted,
        }
    }

    /// What the exact-mode compaction `x` stands for: the raw events it
    /// covers, and the summaries stored before it whose interval is within
    /// its own (rolled into it), positions ascending.
    pub(super) fn within(&self, events: &[EventView], x: &Extent) -> (Vec<usize>, Vec<usize>) {
        let stamp = |p: &usize| events[*p].timestamp;
        let from = self.raw.partition_point(|p| stamp(p) < x.start);
        let mut handed: Vec<usize> = self.raw[from..]
            .iter()
            .copied()
            .take_while(|p| stamp(p) <= x.end)
            .filter(|&p| x.covers(p, &events[p]))
            .collect();
        handed.sort_unstable();
        let bounds = |p: usize| events[p].compaction.and_then(|c| c.bounds());
        let start = |p: &usize| bounds(*p).map_or(f64::NAN, |(s, _)| s);
        let from = self.compactions.partition_point(|p| start(p) < x.start);
        let mut seeds: Vec<usize> = self.compactions[from..]
            .iter()
            .take_while(|p| start(p) <= x.end)
            .chain(&self.inverted)
            .copied()
            .filter(|&p| p < x.at && bounds(p).is_some_and(|(s, e)| x.start <= s && e <= x.end))
            .collect();
        seeds.sort_unstable();
        (handed, seeds)
    }
}
