//! Lean loading from a SQL store: each stored row read once into its view.
//!
//! A SQL session service keeps one row per event, appended and never
//! rewritten (google-adk's `append_event` inserts; only `delete_session`
//! removes rows, all of a session's at once). A lean load lists the
//! session's rows (event id and a few columns, in the store's loading
//! order), parses only the rows it has not seen ([`SessionRows::insert`],
//! the stored-event parser of [`super::stored`] plus the [`Facts`] lean
//! loading reads), and asks [`super::lean::needed`] which positions the turn
//! reads ([`SessionRows::needed`]); only those rows are then decoded by
//! google-adk. Every load lists the rows again, so a row another process
//! stored is always considered.
//!
//! A row is known by its event id (unique within a session) and checked by
//! its stamp (the invocation id and timestamp columns, and the storage row
//! id where the store has one): a session deleted and made again under the
//! same id with rows of the same event ids but other stamps is read again.

use super::event::{Span, Sym};
use super::hash::FastMap;
use super::lean::{
    self, branch_refs, decide_grown, Dropped, Facts, Settings, Shown, Turn, ABORTED,
};
use super::stored::{parse, StoredError, StoredEvent, StoredSession};
use std::borrow::Cow;

/// A row as the listing query returns it.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// The event id column.
    pub id: &'a str,
    /// The invocation id column.
    pub invocation: &'a str,
    /// The timestamp column, as the binding keys it.
    pub stamp: u64,
    /// The storage row id, where the store has one (else 0).
    pub row: i64,
}

/// How a store turns a row into an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoding {
    /// The stored JSON alone (`SqliteSessionService`).
    Json,
    /// The stored JSON with the id and invocation id columns over it, and
    /// the timestamp column where the JSON has none
    /// (`DatabaseSessionService`'s `StorageEvent.to_event`).
    Columns,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    invocation: Sym,
    stamp: u64,
    row: i64,
    slot: u32,
}

/// What a slot was read from: its row's event id, stamp and storage row id.
#[derive(Debug, Clone, Copy)]
struct Key {
    id: Sym,
    stamp: u64,
    row: i64,
}

/// The last decision on the session's rows: the listing it was made on
/// (slots, in loading order), the positions it kept and what it left out,
/// from which the next listing, when it only grew, is decided
/// ([`decide_grown`]).
struct Decided {
    settings: Settings,
    listed: Vec<u32>,
    kept: Vec<u32>,
    dropped: Dropped,
}

/// The rows of one session read so far.
#[derive(Default)]
pub struct SessionRows {
    /// Which making of the session's entry this is (a listing's slots are
    /// good for this one only).
    pub epoch: u64,
    stored: StoredSession,
    facts: Vec<Facts>,
    refs: Vec<Sym>,
    rows: FastMap<Box<str>, Row>,
    keys: Vec<Key>,
    decided: Option<Decided>,
}

impl SessionRows {
    /// Rows read (slots held, the replaced ones included).
    pub fn slots(&self) -> usize {
        self.stored.views.len()
    }

    /// The slot of a listed row read before with the same stamp.
    pub fn slot(&self, row: &Listed<'_>) -> Option<u32> {
        let known = self.rows.get(row.id)?;
        let same = known.stamp == row.stamp
            && known.row == row.row
            && self.stored.texts.text(known.invocation) == row.invocation;
        same.then_some(known.slot)
    }

    /// Reads a listed row's stored JSON (`fallback` is the timestamp column
    /// as an epoch, for [`Decoding::Columns`]); returns its slot.
    pub fn insert(
        &mut self,
        row: &Listed<'_>,
        json: &[u8],
        decoding: Decoding,
        fallback: Option<f64>,
    ) -> Result<u32, StoredError> {
        let mut event = parse(json)?;
        if decoding == Decoding::Columns {
            event.id = Some(Cow::Borrowed(row.id));
            event.invocation_id = Some(Cow::Borrowed(row.invocation));
            event.timestamp = event.timestamp.or(fallback);
        }
        let refs = self.refs.len();
        let facts = facts(&event, &mut self.stored, &mut self.refs)
            .inspect_err(|_| self.refs.truncate(refs))?;
        let slot = self
            .stored
            .append(event)
            .inspect_err(|_| self.refs.truncate(refs))?;
        self.facts.push(facts);
        let invocation = self.sym(row.invocation)?;
        let id = self.sym(row.id)?;
        self.keys.push(Key {
            id,
            stamp: row.stamp,
            row: row.row,
        });
        let slot = u32::try_from(slot).map_err(|_| StoredError::TooManyIds)?;
        self.rows.insert(
            row.id.into(),
            Row {
                invocation,
                stamp: row.stamp,
                row: row.row,
                slot,
            },
        );
        Ok(slot)
    }

    fn sym(&mut self, text: &str) -> Result<Sym, StoredError> {
        self.stored
            .texts
            .symbol(text)
            .map_err(|_| StoredError::TooManyIds)
    }

    /// The event id and storage row id of the row read into `slot`.
    pub fn key(&self, slot: u32) -> (&str, i64) {
        let k = &self.keys[slot as usize];
        (self.stored.texts.text(k.id), k.row)
    }

    /// Whether `row` is the row read into `slot`.
    pub fn is(&self, slot: u32, row: &Listed<'_>) -> bool {
        self.slot(row) == Some(slot)
    }

    /// The listing the last decision was made on (slots in loading order;
    /// empty before one).
    pub fn listed(&self) -> &[u32] {
        self.decided.as_ref().map_or(&[], |d| &d.listed)
    }

    /// The rows of the last decision's listing before its newest stamp
    /// (its rows stamped as its last one excluded), and those: the rows a
    /// listing of the rows stamped from the newest stamp on leaves out, and
    /// those it lists again. `None` before a decision.
    pub fn horizon(&self) -> Option<(&[u32], &[u32])> {
        let listed = self.listed();
        let last = self.keys[*listed.last()? as usize].stamp;
        let below = listed
            .iter()
            .rposition(|&s| self.keys[s as usize].stamp != last)
            .map_or(0, |i| i + 1);
        Some(listed.split_at(below))
    }

    /// Positions (ascending, into `slots`) of the rows a turn reads, `slots`
    /// being the session's rows in loading order. A listing that holds the
    /// last decision's followed by new rows is decided from that decision
    /// ([`decide_grown`]), without the rows it left out.
    pub fn needed(
        &mut self,
        slots: &[u32],
        settings: &Settings,
        underway: &[&str],
        answering: &[&str],
    ) -> Result<Vec<usize>, StoredError> {
        let underway = underway
            .iter()
            .map(|t| self.sym(t))
            .collect::<Result<Vec<_>, _>>()?;
        let answering = answering
            .iter()
            .map(|t| self.sym(t))
            .collect::<Result<Vec<_>, _>>()?;
        let turn = Turn {
            underway: &underway,
            answering: &answering,
        };
        if let Some(mut last) = self.decided.take() {
            let n = last.listed.len();
            if last.settings == *settings && slots.len() >= n && slots[..n] == last.listed[..] {
                let at: Vec<usize> = (last.kept.iter().map(|&k| k as usize))
                    .chain(n..slots.len())
                    .collect();
                let views: Vec<_> = at
                    .iter()
                    .map(|&i| self.stored.views[slots[i] as usize])
                    .collect();
                let facts: Vec<_> = at.iter().map(|&i| self.facts[slots[i] as usize]).collect();
                let grown = slots.len() - n;
                let arenas = (&self.stored.ids[..], &self.refs[..]);
                if let Some(keep) = decide_grown(
                    &views,
                    &facts,
                    arenas,
                    grown,
                    &mut last.dropped,
                    settings,
                    turn,
                ) {
                    let positions: Vec<usize> = keep.iter().map(|&k| at[k]).collect();
                    self.decided = Some(Decided {
                        settings: *settings,
                        listed: slots.to_vec(),
                        kept: positions.iter().map(|&p| p as u32).collect(),
                        dropped: last.dropped,
                    });
                    return Ok(positions);
                }
            }
        }
        let views: Vec<_> = slots
            .iter()
            .map(|&s| self.stored.views[s as usize])
            .collect();
        let facts: Vec<_> = slots.iter().map(|&s| self.facts[s as usize]).collect();
        let (keep, dropped) =
            lean::decide(&views, &facts, &self.stored.ids, &self.refs, settings, turn);
        self.decided = Some(Decided {
            settings: *settings,
            listed: slots.to_vec(),
            kept: keep.iter().map(|&p| p as u32).collect(),
            dropped,
        });
        Ok(keep)
    }
}

/// What lean loading reads of a stored event besides its view, as the
/// binding reads it of a decoded Event (`py::reading::facts`): the fields
/// `core::lean::Facts::of` makes the facts of.
fn facts(
    e: &StoredEvent<'_>,
    s: &mut StoredSession,
    refs: &mut Vec<Sym>,
) -> Result<Facts, StoredError> {
    let branch = e.branch.as_deref().unwrap_or("");
    let start = refs.len() as u32;
    for id in branch_refs(branch) {
        refs.push(s.texts.symbol(id).map_err(|_| StoredError::TooManyIds)?);
    }
    let error_code = e.error_code.as_deref().unwrap_or("");
    let (transfer, state) = match &e.actions {
        None => (false, false),
        Some(a) => (
            a.transfer_to_agent
                .as_deref()
                .is_some_and(|t| !t.is_empty()),
            a.agent_state || a.end_of_agent == Some(true),
        ),
    };
    let has_parts = e
        .content
        .as_ref()
        .and_then(|c| c.parts.as_ref())
        .is_some_and(|p| !p.is_empty());
    let shown = Shown {
        branch: !branch.is_empty(),
        path: e
            .node_info
            .as_ref()
            .and_then(|n| n.path.as_deref())
            .is_some_and(|p| !p.is_empty()),
        error: !error_code.is_empty(),
        aborted: error_code == ABORTED,
        content_less_error: !error_code.is_empty() && !has_parts,
        transfer,
        state,
        by_user: e.author.as_deref() == Some("user"),
        cache: e.cache_metadata,
        interaction: e.interaction_id.as_deref().is_some_and(|i| !i.is_empty()),
    };
    let refs = Span {
        start,
        len: refs.len() as u32 - start,
    };
    Ok(Facts::of(&shown, refs))
}

/// The sessions read so far, each under its key, within a budget of slots:
/// past it, the sessions used longest ago are forgotten (and read again
/// when next loaded).
#[derive(Default)]
pub struct RowCache {
    sessions: FastMap<Box<str>, (u64, SessionRows)>,
    clock: u64,
    /// Slots held by all sessions.
    held: usize,
    /// The budget of slots.
    pub budget: usize,
}

impl RowCache {
    /// A cache holding at most `budget` slots besides the session in use.
    pub fn new(budget: usize) -> Self {
        RowCache {
            budget,
            ..RowCache::default()
        }
    }

    /// The rows of the session under `key`, made if new.
    pub fn session(&mut self, key: &str) -> &mut SessionRows {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.sessions.entry(key.into()).or_insert_with(|| {
            (
                clock,
                SessionRows {
                    epoch: clock,
                    ..SessionRows::default()
                },
            )
        });
        entry.0 = clock;
        &mut entry.1
    }

    /// The rows of the session under `key`, when held (not made, and not
    /// counted as a use).
    pub fn get(&self, key: &str) -> Option<&SessionRows> {
        self.sessions.get(key).map(|(_, s)| s)
    }

    /// Forgets the session under `key` (its rows are read again next time).
    pub fn forget(&mut self, key: &str) {
        if let Some((_, s)) = self.sessions.remove(key) {
            self.held -= s.slots();
        }
    }

    /// Accounts for `added` slots read into the session under `key`, then
    /// forgets the sessions used longest ago (never `key`'s) while over
    /// budget.
    pub fn added(&mut self, key: &str, added: usize) {
        self.held += added;
        if self.held <= self.budget {
            return;
        }
        let mut by_age: Vec<(u64, Box<str>)> = self
            .sessions
            .iter()
            .filter(|(k, _)| &***k != key)
            .map(|(k, (used, _))| (*used, k.clone()))
            .collect();
        by_age.sort_unstable();
        for (_, k) in by_age {
            if self.held <= self.budget {
                break;
            }
            self.forget(&k);
        }
    }

    /// Sessions and slots held.
    pub fn stats(&self) -> (usize, usize) {
        (self.sessions.len(), self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lean::mark;
    use crate::core::stored::StoredSession;

    fn listed<'a>(id: &'a str, invocation: &'a str, stamp: u64) -> Listed<'a> {
        Listed {
            id,
            invocation,
            stamp,
            row: 0,
        }
    }

    #[test]
    fn a_row_is_read_once_and_again_when_its_stamp_changes() {
        let mut s = SessionRows::default();
        let a = listed("e1", "i1", 1);
        assert_eq!(s.slot(&a), None);
        let slot = s
            .insert(
                &a,
                br#"{"id":"e1","invocation_id":"i1","author":"user","timestamp":1.0}"#,
                Decoding::Json,
                None,
            )
            .unwrap();
        assert_eq!(s.slot(&a), Some(slot));
        assert_eq!(s.slot(&listed("e1", "i1", 2)), None);
        assert_eq!(s.slot(&listed("e1", "i2", 1)), None);
        assert_eq!(s.slot(&Listed { row: 7, ..a }), None);
        let bad = s.insert(&listed("e2", "i1", 1), b"{", Decoding::Json, None);
        assert!(bad.is_err());
        assert_eq!(s.slots(), 1);
    }

    #[test]
    fn columns_stand_over_the_json_as_the_database_service_decodes() {
        let mut s = SessionRows::default();
        let row = listed("col-id", "col-inv", 1);
        let slot = s
            .insert(
                &row,
                br#"{"id":"x","invocation_id":"y","author":"a"}"#,
                Decoding::Columns,
                Some(4.5),
            )
            .unwrap();
        let v = s.stored.views[slot as usize];
        assert_eq!(v.timestamp, 4.5);
        assert_eq!(s.stored.texts.text(v.invocation.unwrap()), "col-inv");
        assert_eq!(s.stored.event_ids[slot as usize].as_deref(), Some("col-id"));
        let no_time = s.insert(
            &listed("e", "i", 1),
            br#"{"author":"a"}"#,
            Decoding::Json,
            None,
        );
        assert_eq!(no_time, Err(StoredError::Timestamp));
    }

    #[test]
    fn facts_are_read_as_the_binding_reads_them_of_an_event() {
        let mut s = StoredSession::default();
        let mut refs = Vec::new();
        let read = |json: &str, s: &mut StoredSession, refs: &mut Vec<Sym>| {
            facts(&parse(json.as_bytes()).unwrap(), s, refs).unwrap()
        };
        let user = read(r#"{"author":"user","timestamp":1}"#, &mut s, &mut refs);
        assert_eq!(user, Facts::default());
        let agent = read(
            r#"{"author":"a","timestamp":1,"branch":"root.tool@c1.sub","node_info":{"path":""},
                "cache_metadata":{"x":1},"interaction_id":"i"}"#,
            &mut s,
            &mut refs,
        );
        assert!(agent.branched && agent.placed && !agent.pinned);
        assert_eq!(agent.marks, mark::ROUTE | mark::CACHE | mark::INTERACTION);
        assert_eq!(agent.refs.len, 1);
        assert_eq!(s.texts.text(refs[agent.refs.start as usize]), "c1");
        let placed = read(
            r#"{"author":"a","timestamp":1,"node_info":{"path":"wf/a"}}"#,
            &mut s,
            &mut refs,
        );
        assert!(placed.placed && !placed.branched);
        let aborted = read(
            r#"{"author":"a","timestamp":1,"error_code":"INVOCATION_ABORTED","content":{"parts":[{"text":"x"}]}}"#,
            &mut s,
            &mut refs,
        );
        assert!(aborted.pinned);
        assert_eq!(aborted.marks, 0);
        let error = read(
            r#"{"author":"a","timestamp":1,"error_code":"E"}"#,
            &mut s,
            &mut refs,
        );
        assert!(error.pinned);
        assert_eq!(error.marks, 0);
        let shown_error = read(
            r#"{"author":"a","timestamp":1,"error_code":"E","content":{"parts":[{"text":"x"}]}}"#,
            &mut s,
            &mut refs,
        );
        assert_eq!(shown_error.marks, mark::ROUTE);
        for state in [r#"{"agent_state":{}}"#, r#"{"end_of_agent":true}"#] {
            let json = format!(r#"{{"author":"a","timestamp":1,"actions":{state}}}"#);
            assert_eq!(read(&json, &mut s, &mut refs).marks, 0, "{state}");
        }
        let not_state = read(
            r#"{"author":"a","timestamp":1,"actions":{"agent_state":null,"end_of_agent":false,"transfer_to_agent":"b"}}"#,
            &mut s,
            &mut refs,
        );
        assert_eq!(not_state.marks, mark::ROUTE);
        assert!(not_state.pinned);
    }

    #[test]
    fn the_budget_forgets_the_sessions_used_longest_ago() {
        let mut c = RowCache::new(2);
        for key in ["a", "b", "c"] {
            let s = c.session(key);
            s.insert(
                &listed("e", "i", 1),
                br#"{"timestamp":1}"#,
                Decoding::Json,
                None,
            )
            .unwrap();
            c.added(key, 1);
        }
        assert_eq!(c.stats(), (2, 2));
        assert_eq!(c.session("a").slots(), 0);
        assert_eq!(c.session("c").slots(), 1);
    }

    /// Rows of a session the e2e app could store: turns of a user message
    /// and a model reply, a sliding-window summary over the last two
    /// turns after every third.
    fn grow(s: &mut SessionRows, listing: &mut Vec<u32>, turns: std::ops::Range<u32>) {
        for t in turns {
            let base = f64::from(t) * 10.0;
            let mut rows = vec![
                (
                    format!("u{t}"),
                    format!(r#"{{"author":"user","invocation_id":"i{t}","timestamp":{base}}}"#),
                ),
                (
                    format!("m{t}"),
                    format!(
                        r#"{{"author":"a","invocation_id":"i{t}","timestamp":{}}}"#,
                        base + 1.0
                    ),
                ),
            ];
            if t % 3 == 2 {
                let start = base - 10.0;
                rows.push((
                    format!("c{t}"),
                    format!(
                        r#"{{"author":"a","invocation_id":"i{t}","timestamp":{},"actions":{{"compaction":{{"start_timestamp":{start},"end_timestamp":{},"compacted_content":{{"parts":[{{"text":"s"}}]}}}}}}}}"#,
                        base + 2.0,
                        base + 1.0
                    ),
                ));
            }
            for (id, json) in rows {
                let inv = format!("i{t}");
                let l = listed(&id, &inv, u64::from(t));
                listing.push(s.insert(&l, json.as_bytes(), Decoding::Json, None).unwrap());
            }
        }
    }

    #[test]
    fn a_grown_listing_is_decided_from_the_last_decision_as_over_the_whole() {
        let settings = Settings {
            window: Some(crate::core::window::SlidingWindow {
                interval: 3,
                overlap: 1,
            }),
            ..Settings::default()
        };
        let mut s = SessionRows::default();
        let mut listing = Vec::new();
        assert_eq!(s.horizon(), None);
        grow(&mut s, &mut listing, 0..12);
        let first = s.needed(&listing, &settings, &[], &[]).unwrap();
        assert!(first.len() < listing.len());
        let (below, at) = s.horizon().unwrap();
        assert_eq!(below.len() + at.len(), listing.len());
        assert_eq!(at.len(), 3, "the last turn's rows share its stamp");
        for turns in [12..13, 13..16, 16..40] {
            grow(&mut s, &mut listing, turns);
            let grown = s.needed(&listing, &settings, &[], &[]).unwrap();
            let views: Vec<_> = listing
                .iter()
                .map(|&x| s.stored.views[x as usize])
                .collect();
            let facts: Vec<_> = listing.iter().map(|&x| s.facts[x as usize]).collect();
            let expected = lean::needed(
                &views,
                &facts,
                &s.stored.ids,
                &s.refs,
                &settings,
                Turn::default(),
            );
            assert_eq!(grown, expected);
            assert_eq!(s.listed(), &listing[..]);
        }
    }
}
