//! For the core's tests: a session builder (views and the id arena their
//! spans index) and a reader that knows only what it was asked for.

use super::coverage::Records;
use super::error::CoreError;
use super::event::{EventView, Need, Span, Sym};
use super::exact::Parsed;
use super::select::Reader;
use std::sync::Arc;

/// Views plus the id arena their spans index.
#[derive(Debug, Default)]
pub struct Session {
    pub events: Vec<EventView>,
    pub ids: Vec<Sym>,
}

impl Session {
    /// `syms` appended to the arena.
    pub fn span(&mut self, syms: &[Sym]) -> Span {
        let start = self.ids.len() as u32;
        self.ids.extend_from_slice(syms);
        Span {
            start,
            len: syms.len() as u32,
        }
    }

    /// A raw event of invocation `inv` at `t`; its position.
    pub fn raw(&mut self, t: f64, inv: u32) -> usize {
        self.events.push(EventView {
            ident: self.events.len() as u64,
            timestamp: t,
            invocation: Some(inv),
            ..Default::default()
        });
        self.events.len() - 1
    }

    /// A raw event calling `id`.
    pub fn call(&mut self, t: f64, inv: u32, id: Sym) -> usize {
        let calls = self.span(&[id]);
        let pos = self.raw(t, inv);
        self.events[pos].calls = calls;
        pos
    }

    /// A raw event answering `id`.
    pub fn response(&mut self, t: f64, inv: u32, id: Sym) -> usize {
        let responses = self.span(&[id]);
        let pos = self.raw(t, inv);
        self.events[pos].responses = responses;
        self.events[pos].has_responses = true;
        pos
    }

    /// A compaction event at `t` over `[start, end]`, with content.
    pub fn compaction(&mut self, t: f64, start: f64, end: f64) -> usize {
        self.events.push(EventView {
            ident: self.events.len() as u64,
            ..EventView::compacting(t, start, end)
        });
        self.events.len() - 1
    }
}

/// A reader of a session whose views show only the fields `known` at first
/// and the others once asked for; it notes every ask. Records are given by
/// position, and a record's invocation `"inv-N"` is symbol `N`.
pub struct Lazy<'a> {
    full: &'a [EventView],
    pub views: Vec<EventView>,
    /// What each view shows.
    known: Vec<Need>,
    ids: &'a [Sym],
    records: Vec<Parsed>,
    /// Each ask: the positions and the fields.
    pub asked: Vec<(Vec<usize>, Need)>,
}

impl<'a> Lazy<'a> {
    pub fn new(s: &'a Session, known: Need, records: Vec<Parsed>) -> Self {
        Lazy {
            full: &s.events,
            views: s.events.iter().map(|v| only(v, known)).collect(),
            known: vec![known; s.events.len()],
            ids: &s.ids,
            records,
            asked: Vec::new(),
        }
    }
}

/// `view` with only the fields of `need` (and its identity).
pub fn only(view: &EventView, need: Need) -> EventView {
    let mut v = EventView {
        ident: view.ident,
        ..EventView::default()
    };
    if need.timestamp {
        v.timestamp = view.timestamp;
    }
    if need.compaction {
        v.compaction = view.compaction;
    }
    if need.rewind {
        v.rewind_before = view.rewind_before;
    }
    if need.invocation {
        v.invocation = view.invocation;
    }
    if need.window {
        v.scope = view.scope;
    }
    if need.parts {
        (v.calls, v.responses, v.has_responses) = (view.calls, view.responses, view.has_responses);
    }
    if need.pairing {
        (v.long_running, v.pending) = (view.long_running, view.pending);
        if need.parts {
            v.hitl_calls = view.hitl_calls;
        }
    }
    if need.usage {
        (v.prompt_tokens, v.author) = (view.prompt_tokens, view.author);
    }
    v
}

impl Reader for Lazy<'_> {
    type Error = CoreError;

    fn views(&self) -> &[EventView] {
        &self.views
    }

    fn ids(&self) -> &[Sym] {
        self.ids
    }

    fn complete(&mut self, at: &[usize], need: Need) -> Result<(), CoreError> {
        for &i in at {
            self.known[i] = self.known[i].with(need);
            self.views[i] = only(&self.full[i], self.known[i]);
        }
        self.asked.push((at.to_vec(), need));
        Ok(())
    }
}

impl Records for Lazy<'_> {
    fn record(&mut self, at: usize, _bounds: (f64, f64)) -> Result<Arc<Parsed>, CoreError> {
        Ok(Arc::new(self.records.get(at).cloned().flatten()))
    }

    fn invocation(&mut self, id: &str) -> Result<Sym, CoreError> {
        id.strip_prefix("inv-")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| CoreError::Internal(format!("unknown invocation {id}")))
    }
}
