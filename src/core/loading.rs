//! How a store loads a session's events: the order its `get_session`
//! returns them in, which the audit's replays and prompts follow.

use super::event::EventView;

/// How a store loads a session's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// As stored (the in-memory service, a `Session` export).
    Stored,
    /// By timestamp, ties in storage order (`SqliteSessionService`).
    Timestamp,
    /// By timestamp, ties by event id (`DatabaseSessionService`).
    TimestampId,
}

/// The session as a store loads the stored events at `avail` (ascending
/// storage positions): positions in loading order. `event_ids` break
/// timestamp ties for [`Order::TimestampId`].
pub(super) fn loaded(
    events: &[EventView],
    avail: &[usize],
    order: Order,
    event_ids: &[Option<String>],
) -> Vec<usize> {
    let mut at = avail.to_vec();
    match order {
        Order::Stored => {}
        Order::Timestamp => {
            at.sort_by(|&a, &b| events[a].timestamp.total_cmp(&events[b].timestamp));
        }
        Order::TimestampId => at.sort_by(|&a, &b| {
            events[a]
                .timestamp
                .total_cmp(&events[b].timestamp)
                .then_with(|| event_ids.get(a).cmp(&event_ids.get(b)))
        }),
    }
    at
}

/// The views at `at`, in that order.
pub(super) fn views_at(events: &[EventView], at: &[usize]) -> Vec<EventView> {
    at.iter().map(|&i| events[i]).collect()
}
