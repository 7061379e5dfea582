//! The decisions google-adk would take on a session, all at once: for
//! offline and audit use over many sessions (`analyze_sessions`), where
//! sessions are independent and analysed in parallel.

use super::error::CoreError;
use super::event::{EventView, Sym};
use super::filter::{self, Item};
use super::ranges::{self, CompactionRange};
use super::rewind;
use super::select::{self, settled, Complete, Rules};
use super::window::SlidingWindow;

/// What google-adk decides on one session.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Indices of the events that survive every rewind.
    pub live: Vec<usize>,
    /// The surviving compaction ranges (`_get_compaction_ranges` on all
    /// events).
    pub ranges: Vec<CompactionRange>,
    /// The prompt history `_process_compaction_events` builds from the
    /// live events (indices into all events), or the core's refusal.
    pub prompt: Result<Vec<Item>, CoreError>,
    /// The events the sliding window would summarize now (after the
    /// function-call pairing trim), when a window is configured.
    pub window: Option<Vec<usize>>,
}

/// Analyses one session: `events` with every field read, `ids` their arena.
pub fn analyze(events: &[EventView], ids: &[Sym], cfg: Option<SlidingWindow>) -> Analysis {
    let live = rewind::apply_rewinds(events);
    let ranges = ranges::compaction_ranges(events);
    let live_views: Vec<EventView> = live.iter().map(|&i| events[i]).collect();
    let prompt = filter::process_compaction_events(&live_views).map(|items| {
        items
            .into_iter()
            .map(|item| match item {
                Item::Raw(k) => Item::Raw(live[k]),
                Item::Summary(k) => Item::Summary(live[k]),
            })
            .collect()
    });
    // The window google-adk 2.13 would summarize, priced or not.
    let rules = Rules {
        priced: false,
        ..Rules::LATEST
    };
    let window = cfg.map(|cfg| {
        let plan = settled(select::sliding(
            &mut Complete { views: events, ids },
            cfg,
            rules,
        ));
        plan.to_compact.iter().map(|&i| i as usize).collect()
    });
    Analysis {
        live,
        ranges,
        prompt,
        window,
    }
}

/// [`analyze`] over many sessions, on all cores when `parallel` (rayon's
/// pool), one after another otherwise; results in input order.
pub fn analyze_all(
    sessions: &[(Vec<EventView>, Vec<Sym>)],
    cfg: Option<SlidingWindow>,
    parallel: bool,
) -> Vec<Analysis> {
    if parallel {
        use rayon::prelude::*;
        sessions
            .par_iter()
            .map(|(events, ids)| analyze(events, ids, cfg))
            .collect()
    } else {
        sessions
            .iter()
            .map(|(events, ids)| analyze(events, ids, cfg))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::CompactionView;

    fn session(offset: f64) -> Vec<EventView> {
        let mut out: Vec<EventView> = (0..12)
            .map(|i| EventView {
                timestamp: offset + f64::from(i),
                invocation: Some(i / 2),
                ..EventView::default()
            })
            .collect();
        out.push(EventView {
            timestamp: offset + 20.0,
            invocation: Some(99),
            compaction: Some(CompactionView {
                start: Some(offset),
                end: Some(offset + 3.0),
                has_content: true,
            }),
            ..EventView::default()
        });
        out
    }

    #[test]
    fn parallel_and_serial_agree_and_keep_the_order() {
        let sessions: Vec<(Vec<EventView>, Vec<Sym>)> = (0..50)
            .map(|k| (session(f64::from(k) * 100.0), Vec::new()))
            .collect();
        let cfg = Some(SlidingWindow {
            interval: 2,
            overlap: 1,
        });
        let serial = analyze_all(&sessions, cfg, false);
        let parallel = analyze_all(&sessions, cfg, true);
        assert_eq!(serial, parallel);
        for ((events, ids), got) in sessions.iter().zip(&serial) {
            assert_eq!(got, &analyze(events, ids, cfg));
        }
    }

    #[test]
    fn the_prompt_replaces_covered_events_by_the_summary() {
        let events = session(0.0);
        let a = analyze(&events, &[], None);
        assert_eq!(a.ranges.len(), 1);
        let prompt = a.prompt.unwrap();
        assert_eq!(prompt[0], Item::Summary(12));
        assert!(!prompt.contains(&Item::Raw(0)));
        assert!(prompt.contains(&Item::Raw(4)));
        assert!(a.window.is_none());
    }
}
