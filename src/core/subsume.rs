//! Which compactions survive in exact mode, and what they hide, without
//! listing what each compaction covers.
//!
//! A compaction covers the raw events stored before it, stamped inside its
//! interval, that no hole of its record names ([`Extent::covers`]). One
//! whose coverage another's contains is dropped (of two with the same
//! coverage, the later survives). Listing every compaction's coverage costs
//! the sum of their sizes, quadratic in a session whose rolling summaries
//! each cover everything before them (and about 13 ms per call at 10k
//! events of sliding-window compactions, against 0.15 ms for parity's
//! whole prompt). Here each compaction is summed up by four numbers, the
//! earliest and latest timestamp and the last position it covers and how
//! many events, so containment is a comparison of bounds plus a look at
//! the container's holes; the union of what the survivors hide is the
//! union of what all compactions cover (a dropped one is inside a
//! survivor), found by one sweep over the events in time order.

use super::event::EventView;
use super::exact::{has_key, Extent};
use std::collections::BTreeSet;

/// What a compaction covers, summed up (`None` when it covers nothing).
#[derive(Debug, Clone, Copy)]
struct Summary {
    count: usize,
    /// Earliest and latest covered timestamp.
    first: f64,
    last: f64,
    /// Largest covered position.
    last_pos: usize,
}

/// The raw events that can be covered (raw, with a key), in time order.
struct Timeline<'a> {
    events: &'a [EventView],
    /// Positions, by timestamp then position.
    order: Vec<usize>,
    times: Vec<f64>,
}

impl<'a> Timeline<'a> {
    fn new(events: &'a [EventView]) -> Self {
        let mut order: Vec<usize> = (0..events.len())
            .filter(|&p| events[p].compaction.is_none() && has_key(events[p].timestamp))
            .collect();
        order.sort_by(|&a, &b| {
            events[a]
                .timestamp
                .total_cmp(&events[b].timestamp)
                .then(a.cmp(&b))
        });
        let times = order.iter().map(|&p| events[p].timestamp).collect();
        Timeline {
            events,
            order,
            times,
        }
    }

    /// The ranks (indices into `order`) stamped inside `x`'s interval.
    fn range(&self, x: &Extent) -> std::ops::Range<usize> {
        // NaN bounds or an inverted interval hold nothing.
        if x.start.partial_cmp(&x.end).is_none_or(|o| o.is_gt()) {
            return 0..0;
        }
        let lo = self.times.partition_point(|&t| t < x.start);
        let hi = self.times.partition_point(|&t| t <= x.end);
        lo..hi.max(lo)
    }

    /// The ranks near `micros` (within what a hole can name).
    fn near(&self, us: i64) -> std::ops::Range<usize> {
        let (lo, hi) = ((us - 3) as f64 / 1e6, (us + 3) as f64 / 1e6);
        let a = self.times.partition_point(|&t| t < lo);
        let b = self.times.partition_point(|&t| t <= hi);
        a..b.max(a)
    }

    /// Positions `x` would cover but one of its holes names.
    fn excluded(&self, x: &Extent) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for h in &x.holes {
            for r in self.near(h.micros) {
                let p = self.order[r];
                let e = &self.events[p];
                if p < x.at && x.start <= e.timestamp && e.timestamp <= x.end && !x.covers(p, e) {
                    out.push(p);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Counts of ranks inserted so far (a Fenwick tree).
struct Counts(Vec<usize>);

impl Counts {
    fn add(&mut self, rank: usize) {
        let mut i = rank + 1;
        while i < self.0.len() {
            self.0[i] += 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Inserted ranks below `rank`.
    fn below(&self, rank: usize) -> usize {
        let (mut i, mut sum) = (rank, 0);
        while i > 0 {
            sum += self.0[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

fn summaries(line: &Timeline<'_>, extents: &[Extent]) -> Vec<Option<Summary>> {
    let events = line.events;
    let mut rank_of = vec![usize::MAX; events.len()];
    for (r, &p) in line.order.iter().enumerate() {
        rank_of[p] = r;
    }
    // Counted in position order: what each compaction's interval holds
    // among the events stored before it.
    let mut by_at: Vec<usize> = (0..extents.len()).collect();
    by_at.sort_by_key(|&k| extents[k].at);
    let mut counts = Counts(vec![0; line.order.len() + 1]);
    let mut next = 0;
    let mut out = vec![None; extents.len()];
    for k in by_at {
        let x = &extents[k];
        while next < x.at.min(events.len()) {
            if rank_of[next] != usize::MAX {
                counts.add(rank_of[next]);
            }
            next += 1;
        }
        let range = line.range(x);
        let inside = counts.below(range.end) - counts.below(range.start);
        let count = inside - line.excluded(x).len();
        if count == 0 {
            continue;
        }
        let covers = |p: usize| x.covers(p, &events[p]);
        let first = range.clone().map(|r| line.order[r]).find(|&p| covers(p));
        let last = range.rev().map(|r| line.order[r]).find(|&p| covers(p));
        let last_pos = (0..x.at.min(events.len())).rev().find(|&p| covers(p));
        if let (Some(first), Some(last), Some(last_pos)) = (first, last, last_pos) {
            out[k] = Some(Summary {
                count,
                first: events[first].timestamp,
                last: events[last].timestamp,
                last_pos,
            });
        }
    }
    out
}

/// The two largest values seen, with whose they are (the largest of the
/// others than one is then at hand).
#[derive(Debug, Clone, Copy, Default)]
struct Top2<T> {
    first: Option<(T, usize)>,
    second: Option<(T, usize)>,
}

impl<T: Copy + PartialOrd> Top2<T> {
    fn with(self, v: T, who: usize) -> Self {
        match self.first {
            Some((f, _)) if v <= f => Top2 {
                first: self.first,
                second: match self.second {
                    Some((s, _)) if v <= s => self.second,
                    _ => Some((v, who)),
                },
            },
            _ => Top2 {
                first: Some((v, who)),
                second: self.first,
            },
        }
    }

    /// The largest value of another than `who`.
    fn other_than(&self, who: usize) -> Option<T> {
        match self.first {
            Some((_, w)) if w == who => self.second.map(|(v, _)| v),
            first => first.map(|(v, _)| v),
        }
    }
}

/// Whether `b` covers everything `a` (summed up as `sa`) covers.
fn contains(line: &Timeline<'_>, a: &Extent, sa: &Summary, b: &Extent) -> bool {
    let inside = b.start <= sa.first && sa.last <= b.end && sa.last_pos < b.at;
    if !inside {
        return false;
    }
    // Every event `a` covers is inside `b`'s interval and stored before it:
    // `b` covers it unless one of `b`'s holes names it.
    let events = line.events;
    !line.excluded(b).iter().any(|&p| a.covers(p, &events[p]))
}

/// The compactions that survive in exact mode, by index in `extents`, and
/// per event whether a survivor covers it (see the module comment).
pub fn survivors(events: &[EventView], extents: &[Extent]) -> (Vec<usize>, Vec<bool>) {
    let line = Timeline::new(events);
    let sums = summaries(&line, extents);
    // Candidates for containing a compaction: those starting no later than
    // its first covered event, found as a prefix of the start order (later
    // compactions first among equal starts: a rolling summary contains
    // everything before it); the prefix maxima reject most at once.
    let mut by_start: Vec<usize> = (0..extents.len()).filter(|&k| sums[k].is_some()).collect();
    by_start.sort_by(|&a, &b| {
        extents[a]
            .start
            .total_cmp(&extents[b].start)
            .then(extents[b].at.cmp(&extents[a].at))
    });
    let starts: Vec<f64> = by_start.iter().map(|&k| extents[k].start).collect();
    let mut max_end: Vec<Top2<f64>> = Vec::with_capacity(by_start.len());
    let mut max_at: Vec<Top2<usize>> = Vec::with_capacity(by_start.len());
    for &k in &by_start {
        let (e, a) = (extents[k].end, extents[k].at);
        max_end.push(max_end.last().copied().unwrap_or_default().with(e, k));
        max_at.push(max_at.last().copied().unwrap_or_default().with(a, k));
    }
    let nonempty = by_start.len();
    let survive: Vec<usize> = (0..extents.len())
        .filter(|&a| {
            let xa = &extents[a];
            let Some(sa) = sums[a] else {
                // Covering nothing, it is inside any other: dropped unless
                // it is the latest and all others cover nothing too.
                let later = extents.iter().any(|xb| xb.at > xa.at);
                return !(nonempty > 0 || later);
            };
            let n = starts.partition_point(|&s| s <= sa.first);
            let beyond = |n: usize| {
                max_end[n - 1].other_than(a).is_some_and(|e| e >= sa.last)
                    && max_at[n - 1]
                        .other_than(a)
                        .is_some_and(|at| at > sa.last_pos)
            };
            if n == 0 || !beyond(n) {
                return true;
            }
            !by_start[..n].iter().any(|&b| {
                let xb = &extents[b];
                b != a
                    && sums[b].is_some_and(|sb| xb.at > xa.at || sb.count > sa.count)
                    && contains(&line, xa, &sa, xb)
            })
        })
        .collect();
    let hidden = sweep(&line, extents, &sums);
    (survive, hidden)
}

/// Per event: whether any compaction covers it (the union of what the
/// survivors cover). Events in time order against the compactions whose
/// interval holds their timestamp, the latest stored first.
fn sweep(line: &Timeline<'_>, extents: &[Extent], sums: &[Option<Summary>]) -> Vec<bool> {
    let events = line.events;
    let mut hidden = vec![false; events.len()];
    let live: Vec<usize> = (0..extents.len()).filter(|&k| sums[k].is_some()).collect();
    let mut by_start = live.clone();
    by_start.sort_by(|&a, &b| extents[a].start.total_cmp(&extents[b].start));
    let mut by_end = live;
    by_end.sort_by(|&a, &b| extents[a].end.total_cmp(&extents[b].end));
    let (mut entered, mut left) = (0, 0);
    let mut active: BTreeSet<(usize, usize)> = BTreeSet::new();
    for &p in &line.order {
        let t = events[p].timestamp;
        while entered < by_start.len() && extents[by_start[entered]].start <= t {
            let k = by_start[entered];
            active.insert((extents[k].at, k));
            entered += 1;
        }
        while left < by_end.len() && extents[by_end[left]].end < t {
            let k = by_end[left];
            active.remove(&(extents[k].at, k));
            left += 1;
        }
        hidden[p] = active
            .range((p + 1, 0)..)
            .rev()
            .any(|&(_, k)| extents[k].covers(p, &events[p]));
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::exact::micros;
    use crate::core::exact::Hole;
    use proptest::prelude::*;

    /// The definition: every compaction's coverage listed.
    fn by_listing(events: &[EventView], extents: &[Extent]) -> (Vec<usize>, Vec<bool>) {
        let cov: Vec<Vec<usize>> = extents
            .iter()
            .map(|x| {
                (0..events.len())
                    .filter(|&p| x.covers(p, &events[p]))
                    .collect()
            })
            .collect();
        let survive: Vec<usize> = (0..extents.len())
            .filter(|&a| {
                !(0..extents.len()).any(|b| {
                    b != a
                        && cov[a].iter().all(|p| cov[b].contains(p))
                        && (cov[a].len() < cov[b].len() || extents[b].at > extents[a].at)
                })
            })
            .collect();
        let mut hidden = vec![false; events.len()];
        for &k in &survive {
            for &p in &cov[k] {
                hidden[p] = true;
            }
        }
        (survive, hidden)
    }

    #[test]
    fn a_rolling_summary_contains_the_ones_it_rolled() {
        let events: Vec<EventView> = (0..6).map(|i| EventView::raw(i as f64, 1)).collect();
        let extents = vec![
            Extent::new(3, 0.0, 2.0, vec![]),
            Extent::new(6, 0.0, 5.0, vec![]),
        ];
        assert_eq!(survivors(&events, &extents), by_listing(&events, &extents));
        assert_eq!(survivors(&events, &extents).0, vec![1]);
    }

    proptest! {
        #[test]
        fn agrees_with_listing_every_coverage(
            times in prop::collection::vec(0u8..12, 1..40),
            invs in prop::collection::vec(0u32..3, 40),
            specs in prop::collection::vec((0usize..40, 0u8..12, 0u8..12, prop::collection::vec(0usize..40, 0..3)), 0..8),
        ) {
            let events: Vec<EventView> = times
                .iter()
                .enumerate()
                .map(|(i, &t)| EventView::raw(t as f64 * 0.5, invs[i]))
                .collect();
            let n = events.len();
            let extents: Vec<Extent> = specs
                .iter()
                .map(|(at, s, e, holes)| {
                    let holes = holes
                        .iter()
                        .filter(|&&h| h < n)
                        .map(|&h| Hole {
                            micros: micros(events[h].timestamp).unwrap(),
                            invocation: events[h].invocation,
                        })
                        .collect();
                    Extent::new(at % (n + 1), *s as f64 * 0.5, *e as f64 * 0.5, holes)
                })
                .collect();
            prop_assert_eq!(survivors(&events, &extents), by_listing(&events, &extents));
        }
    }
}
