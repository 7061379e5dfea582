//! Criterion benches of the core on synthetic session views, each beside a
//! naive baseline (what a direct transcription without indexing costs).

use adk_fastcompact::core::{
    filter::process_compaction_events, ranges::compaction_ranges, rewind::apply_rewinds,
    CompactionView, EventView,
};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

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
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
