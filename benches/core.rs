//! Criterion benches of the core on synthetic session views, each beside a
//! naive baseline (what a direct transcription without indexing costs).

use adk_fastcompact::core::{
    analysis::analyze_all,
    coverage::{self, Coverage},
    exact::Extent,
    filter::process_compaction_events,
    index::{group, id_key, EventIndex},
    lean::{decide, needed, Facts, Settings, Turn},
    ranges::compaction_ranges,
    rewind::apply_rewinds,
    window::{sliding_window_candidates, SlidingWindow},
    CompactionView, EventView,
};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use std::collections::HashMap;

/// A session of `n` events: invocations of 8 events, a sliding-window
/// compaction every 3 invocations overlapping the previous one by one
/// invocation, and a rewind every 50 invocations.
fn session(n: usize) -> Vec<EventView> {
    let mut out = Vec::with_capacity(n);
    let mut ts = 0.0;
    let mut inv = 0u32;
    let mut window_start = 0.0;
    let mut prev_inv_start = 0.0;
    while out.len() < n {
        inv += 1;
        let inv_start = ts;
        for _ in 0..8 {
            ts += 1.0;
            out.push(EventView {
                timestamp: ts,
                invocation: Some(inv),
                ident: out.len() as u64,
                ..Default::default()
            });
        }
        if inv % 50 == 0 {
            ts += 1.0;
            out.push(EventView {
                timestamp: ts,
                invocation: Some(inv),
                rewind_before: Some(inv - 1),
                ..Default::default()
            });
        }
        if inv % 3 == 0 {
            ts += 1.0;
            out.push(EventView {
                timestamp: ts,
                compaction: Some(CompactionView {
                    start: Some(window_start),
                    end: Some(ts - 1.0),
                    has_content: true,
                }),
                ..Default::default()
            });
            window_start = prev_inv_start;
        }
        prev_inv_start = inv_start;
    }
    out.truncate(n);
    out
}

/// Baseline: check every event against every surviving range.
fn naive_filter(events: &[EventView]) -> usize {
    let ranges = compaction_ranges(events);
    events
        .iter()
        .filter(|e| {
            e.compaction.is_none()
                && !ranges
                    .iter()
                    .any(|r| r.start <= e.timestamp && e.timestamp <= r.end)
        })
        .count()
}

/// Baseline: google-adk's window as a transcription would compute it: the
/// last compaction's end by a scan, then every later event's invocation
/// collected and deduplicated by linear search.
fn naive_window(events: &[EventView], cfg: SlidingWindow) -> usize {
    let end = events
        .iter()
        .filter_map(|e| e.compaction.and_then(|c| c.end))
        .fold(0.0, f64::max);
    let mut invocations: Vec<u32> = Vec::new();
    for e in events
        .iter()
        .filter(|e| e.timestamp > end && e.compaction.is_none())
    {
        if let Some(inv) = e.invocation {
            if !invocations.contains(&inv) {
                invocations.push(inv);
            }
        }
    }
    if invocations.len() < cfg.interval {
        return 0;
    }
    events.iter().filter(|e| e.timestamp > end).count()
}

/// The address of the `i`-th event object: 16-byte aligned and a small
/// object apart, as CPython allocates them.
fn addr(i: usize) -> usize {
    0x7f00_0000_0000 + 96 * i
}

/// An index holding `events` under ids `e{i}`, bound to addresses `addr(i)`.
fn index_of(events: &[EventView]) -> EventIndex {
    let mut index = EventIndex::default();
    for (i, v) in events.iter().enumerate() {
        index
            .insert(id_key(&format!("e{i}")), addr(i), v, u16::MAX, &[])
            .unwrap();
    }
    index
}

fn bench_index(c: &mut Criterion) {
    let mut group = c.benchmark_group("index");
    let groups = group::TIMESTAMP | group::COMPACTION | group::INVOCATION | group::REWIND;
    for n in [1_000usize, 10_000, 50_000] {
        let events = session(n);
        let index = index_of(&events);
        let ids: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
        // A warm call's gather: every item found by address, its view expanded.
        group.bench_with_input(BenchmarkId::new("gather_by_address", n), &index, |b, ix| {
            b.iter(|| {
                (0..n)
                    .map(|i| {
                        let slot = ix.slot_of_ptr(black_box(addr(i))).unwrap();
                        ix.view_of_groups(slot, addr(i) as u64, groups).timestamp
                    })
                    .sum::<f64>()
            })
        });
        // The address table alone, beside a hash map of address to slot
        // (what it replaced: 4 bytes a bucket instead of 17).
        group.bench_with_input(BenchmarkId::new("lookup_by_address", n), &index, |b, ix| {
            b.iter(|| {
                (0..n)
                    .filter_map(|i| ix.slot_of_ptr(black_box(addr(i))))
                    .count()
            })
        });
        let by_addr: HashMap<usize, u32> = (0..n).map(|i| (addr(i), i as u32)).collect();
        group.bench_with_input(
            BenchmarkId::new("naive_lookup_by_address", n),
            &by_addr,
            |b, m| b.iter(|| (0..n).filter_map(|i| m.get(&black_box(addr(i)))).count()),
        );
        // Baseline: copying already-extracted views (what a per-call cache
        // keyed by the whole list would cost at best).
        group.bench_with_input(BenchmarkId::new("naive_copy_views", n), &events, |b, ev| {
            b.iter(|| black_box(ev.to_vec()).len())
        });
        // A cold call's lookup: every id hashed and found.
        group.bench_with_input(BenchmarkId::new("lookup_by_id", n), &ids, |b, ids| {
            b.iter(|| {
                ids.iter()
                    .filter_map(|id| index.slot_of_id(id_key(id)))
                    .count()
            })
        });
        let naive: HashMap<String, u32> = ids.iter().cloned().zip(0..).collect();
        group.bench_with_input(BenchmarkId::new("naive_lookup_by_id", n), &ids, |b, ids| {
            b.iter(|| ids.iter().filter_map(|id| naive.get(id)).count())
        });
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("core");
    for n in [1_000usize, 10_000, 50_000] {
        let events = session(n);
        group.bench_with_input(
            BenchmarkId::new("process_compaction_events", n),
            &events,
            |b, ev| b.iter(|| process_compaction_events(black_box(ev)).unwrap().len()),
        );
        group.bench_with_input(BenchmarkId::new("naive_filter", n), &events, |b, ev| {
            b.iter(|| naive_filter(black_box(ev)))
        });
        group.bench_with_input(BenchmarkId::new("apply_rewinds", n), &events, |b, ev| {
            b.iter(|| apply_rewinds(black_box(ev)).len())
        });
        group.bench_with_input(
            BenchmarkId::new("compaction_ranges", n),
            &events,
            |b, ev| b.iter(|| compaction_ranges(black_box(ev)).len()),
        );
        let cfg = SlidingWindow {
            interval: 3,
            overlap: 1,
        };
        group.bench_with_input(BenchmarkId::new("sliding_window", n), &events, |b, ev| {
            b.iter(|| {
                let live = apply_rewinds(black_box(ev));
                sliding_window_candidates(ev, &live, cfg).len()
            })
        });
        group.bench_with_input(BenchmarkId::new("naive_window", n), &events, |b, ev| {
            b.iter(|| naive_window(black_box(ev), cfg))
        });
    }
    group.finish();
}

/// Exact mode's extents of `events`' compactions (record-less: intervals).
fn extents_of(events: &[EventView]) -> Vec<Extent> {
    events
        .iter()
        .enumerate()
        .filter_map(|(at, e)| {
            let (s, t) = e.compaction?.bounds()?;
            Some(Extent::new(at, s, t, Vec::new()))
        })
        .collect()
}

/// Baseline of exact mode's coverage: every compaction's coverage listed,
/// containment by set inclusion.
fn naive_coverage(events: &[EventView], extents: &[Extent]) -> usize {
    let cov: Vec<Vec<usize>> = extents
        .iter()
        .map(|x| (0..x.at).filter(|&p| x.covers(p, &events[p])).collect())
        .collect();
    (0..extents.len())
        .filter(|&a| {
            !(0..extents.len()).any(|b| {
                b != a
                    && cov[a].iter().all(|p| cov[b].binary_search(p).is_ok())
                    && (cov[a].len() < cov[b].len() || extents[b].at > extents[a].at)
            })
        })
        .count()
}

fn bench_exact(c: &mut Criterion) {
    let mut group = c.benchmark_group("exact");
    for n in [1_000usize, 10_000, 50_000] {
        let events = session(n);
        // Exact mode's prompt beside parity's `process_compaction_events`
        // (group "core") on the same events.
        group.bench_with_input(BenchmarkId::new("prompt", n), &events, |b, ev| {
            b.iter(|| {
                let cov = Coverage::new(black_box(ev), extents_of(ev));
                coverage::prompt(ev, &cov).len()
            })
        });
        if n <= 10_000 {
            let extents = extents_of(&events);
            group.bench_with_input(BenchmarkId::new("naive_coverage", n), &events, |b, ev| {
                b.iter(|| naive_coverage(black_box(ev), &extents))
            });
        }
    }
    group.finish();
}

fn bench_analysis(c: &mut Criterion) {
    let mut group = c.benchmark_group("analyze_sessions");
    let sessions: Vec<(Vec<EventView>, Vec<u32>)> =
        (0..64).map(|_| (session(2_000), Vec::new())).collect();
    let cfg = Some(SlidingWindow {
        interval: 3,
        overlap: 1,
    });
    // 64 sessions of 2k events: rayon's pool against the serial loop.
    group.bench_function("parallel_64x2000", |b| {
        b.iter(|| analyze_all(black_box(&sessions), cfg, true).len())
    });
    group.bench_function("serial_64x2000", |b| {
        b.iter(|| analyze_all(black_box(&sessions), cfg, false).len())
    });
    group.finish();
}

/// Lean loading's decision: over the whole session (a first load), and
/// over the last lean list grown by one invocation (every later turn, what
/// the index's memo decides over), beside each other.
fn bench_lean(c: &mut Criterion) {
    let mut group = c.benchmark_group("lean");
    let settings = Settings {
        window: Some(SlidingWindow {
            interval: 3,
            overlap: 1,
        }),
        ..Settings::default()
    };
    for n in [1_000usize, 10_000, 100_000] {
        let events = session(n);
        let facts = vec![Facts::default(); n];
        group.bench_with_input(BenchmarkId::new("whole_session", n), &events, |b, ev| {
            b.iter(|| needed(black_box(ev), &facts, &[], &[], &settings, Turn::default()).len())
        });
        let (keep, _) = decide(&events, &facts, &[], &[], &settings, Turn::default());
        let last = events.last().map_or(0.0, |e| e.timestamp);
        // A new invocation: the next symbol (symbols are dense).
        let next = events
            .iter()
            .filter_map(|e| e.invocation)
            .max()
            .unwrap_or(0)
            + 1;
        let mut grown: Vec<EventView> = keep.iter().map(|&i| events[i]).collect();
        grown.extend((1..=8).map(|k| EventView {
            timestamp: last + f64::from(k),
            invocation: Some(next),
            ..Default::default()
        }));
        let grown_facts = vec![Facts::default(); grown.len()];
        group.bench_with_input(BenchmarkId::new("lean_list_grown", n), &grown, |b, ev| {
            b.iter(|| {
                decide(
                    black_box(ev),
                    &grown_facts,
                    &[],
                    &[],
                    &settings,
                    Turn::default(),
                )
                .0
                .len()
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench,
    bench_index,
    bench_exact,
    bench_analysis,
    bench_lean
);
criterion_main!(benches);
