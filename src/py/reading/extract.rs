//! Reading google-adk `Event` objects into core views.
//!
//! Fields are read from each model's instance `__dict__` obtained with
//! `PyObject_GenericGetDict`: pydantic models define `__getattr__`, which
//! sends every ordinary C-level attribute lookup through a Python-level slot,
//! while the instance dict is a plain pointer read. Every object must be of
//! a class that reads like the google-adk / google-genai model expected (the
//! model itself or a subclass proven to read like it, see `classes`);
//! anything else (other subclasses, foreign objects, `None` in a list, `str`
//! subclasses, non-float timestamps) declines, and the caller falls back to
//! google-adk's own code.

use super::fields::Fields;
use super::prefetch;
use super::scratch::Views;
use crate::core::event::Need;
use crate::core::texts::Texts;
use crate::core::{CompactionView, EventView, Span, Sym};
use crate::py::error::{Extracted, Outcome};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PySet, PyString};

pub use super::classes::{types, Model, Types};

/// The instance `__dict__` of `obj`, whose class must read like `model`
/// (see [`Model::accepts`]).
#[inline]
pub fn model_dict<'py>(
    obj: &Bound<'py, PyAny>,
    model: &Model,
    what: &'static str,
) -> Extracted<Bound<'py, PyDict>> {
    if !model.accepts(&obj.get_type()) {
        return Err(Outcome::Decline(what));
    }
    instance_dict(obj)?.ok_or(Outcome::Decline(what))
}

/// The instance `__dict__` of `obj` (created if needed); `None` when it is
/// not a `dict`.
#[inline]
pub fn instance_dict<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    // SAFETY: `obj` is a live object; PyObject_GenericGetDict returns a new
    // reference to its instance dict (creating it if needed) or NULL with an
    // exception set.
    let dict = unsafe {
        Bound::from_owned_ptr_or_err(
            obj.py(),
            ffi::PyObject_GenericGetDict(obj.as_ptr(), std::ptr::null_mut()),
        )
    }?;
    Ok(dict.cast_into::<PyDict>().ok())
}

/// The instance `__dict__` of `obj` when it is exactly an `Event`.
pub fn event_dict<'py>(obj: &Bound<'py, PyAny>) -> Extracted<Option<Bound<'py, PyDict>>> {
    let t = types(obj.py())?;
    if !t.event.accepts(&obj.get_type()) {
        return Ok(None);
    }
    model_dict(obj, &t.event, "not an Event").map(Some)
}

/// The fields extraction reads, each with its entry-position slot in
/// [`Fields`] (the same key always with the same slot).
#[derive(Clone, Copy)]
enum F {
    Timestamp,
    Invocation,
    Scope,
    LongRunning,
    Author,
    Usage,
    Actions,
    Content,
    PromptTokens,
    Rewind,
    Compaction,
    Confirmations,
    AuthConfigs,
    Parts,
    Call,
    Response,
    CallId,
    CallName,
    ResponseId,
    Start,
    End,
    Compacted,
}

impl F {
    /// The field's name: its key in the model's instance dict.
    fn key(self, py: Python<'_>) -> &Bound<'_, PyString> {
        match self {
            F::Timestamp => intern!(py, "timestamp"),
            F::Invocation => intern!(py, "invocation_id"),
            F::Scope => intern!(py, "isolation_scope"),
            F::LongRunning => intern!(py, "long_running_tool_ids"),
            F::Author => intern!(py, "author"),
            F::Usage => intern!(py, "usage_metadata"),
            F::Actions => intern!(py, "actions"),
            F::Content => intern!(py, "content"),
            F::PromptTokens => intern!(py, "prompt_token_count"),
            F::Rewind => intern!(py, "rewind_before_invocation_id"),
            F::Compaction => intern!(py, "compaction"),
            F::Confirmations => intern!(py, "requested_tool_confirmations"),
            F::AuthConfigs => intern!(py, "requested_auth_configs"),
            F::Parts => intern!(py, "parts"),
            F::Call => intern!(py, "function_call"),
            F::Response => intern!(py, "function_response"),
            F::CallId | F::ResponseId => intern!(py, "id"),
            F::CallName => intern!(py, "name"),
            F::Start => intern!(py, "start_timestamp"),
            F::End => intern!(py, "end_timestamp"),
            F::Compacted => intern!(py, "compacted_content"),
        }
    }

    /// The key with the field's position slot, as prefetching takes them.
    fn keyed(self, py: Python<'_>) -> (&Bound<'_, PyString>, usize) {
        (self.key(py), self as usize)
    }

    /// What a call declines with when the field is missing or unreadable.
    fn what(self) -> &'static str {
        match self {
            F::Timestamp => "timestamp",
            F::Invocation => "invocation_id",
            F::Scope => "isolation_scope",
            F::LongRunning => "long_running",
            F::Author => "author",
            F::Usage => "usage_metadata",
            F::Actions => "actions",
            F::Content | F::Compacted => "content",
            F::PromptTokens => "prompt_token_count",
            F::Rewind => "rewind",
            F::Compaction => "compaction",
            F::Confirmations | F::AuthConfigs => "pending",
            F::Parts => "parts",
            F::Call => "call",
            F::Response => "response",
            F::CallId => "call id",
            F::CallName => "call name",
            F::ResponseId => "response id",
            F::Start => "start",
            F::End => "end",
        }
    }
}

/// `dict[f]`, borrowed (used before any Python code runs); a missing key
/// declines (a model built without the field).
#[inline]
fn field<'a, 'py>(
    fields: &mut Fields,
    dict: &'a Bound<'py, PyDict>,
    f: F,
) -> Extracted<Borrowed<'a, 'py, PyAny>> {
    fields
        .get(dict, f.key(dict.py()), f as usize)?
        .ok_or(Outcome::Decline(f.what()))
}

/// Sets `keys` to the fields a stage reads (with their slots, to prefetch):
/// each group's fields where its need holds, in order.
fn stage_keys<'py>(
    py: Python<'py>,
    keys: &mut Vec<(&'py Bound<'py, PyString>, usize)>,
    groups: &[(bool, &[F])],
) {
    keys.clear();
    for &(wanted, fields) in groups {
        if wanted {
            keys.extend(fields.iter().map(|f| f.keyed(py)));
        }
    }
}

/// A float field: exactly `float` (Python compares ints and floats exactly,
/// which an `f64` cannot always reproduce, so anything else declines).
#[inline]
fn float_value(value: &Bound<'_, PyAny>, what: &'static str) -> Extracted<f64> {
    match value.cast_exact::<PyFloat>() {
        Ok(f) => Ok(f.value()),
        Err(_) => Err(Outcome::Decline(what)),
    }
}

/// `None` or a float.
#[inline]
fn optional_float(value: &Bound<'_, PyAny>, what: &'static str) -> Extracted<Option<f64>> {
    if value.is_none() {
        Ok(None)
    } else {
        float_value(value, what).map(Some)
    }
}

/// Interns exact `str` values into dense symbols; `""` is symbol
/// [`EMPTY`]. Only distinct strings are copied, once each (into pages
/// of text, see [`Texts`]). Events of one invocation usually share the very
/// same `str` object (an invocation's id, an agent's name as author, and
/// a deep copy's strings are its original's), so the strings asked for
/// recently, by address, answer most queries without reading the text; an
/// address is stable because the caller holds every event (and so every
/// string) for the whole extraction and no Python code runs meanwhile.
pub struct Interner {
    texts: Texts,
    /// Recent strings (address, symbol), at their address's bucket: the
    /// fields of one event (invocation id, author, ...) alternate between
    /// a few objects that one entry would keep evicting each other.
    recent: Box<[(usize, Sym); RECENT]>,
}

/// Buckets of [`Interner::recent`] (a power of two).
const RECENT: usize = 64;

/// The symbol of the empty string.
pub const EMPTY: Sym = 0;

impl Default for Interner {
    fn default() -> Self {
        let mut texts = Texts::default();
        let empty = texts.symbol("");
        debug_assert_eq!(empty, Ok(EMPTY));
        Interner {
            texts,
            recent: Box::new([(0, EMPTY); RECENT]),
        }
    }
}

impl Interner {
    /// Forgets the recent strings: addresses are only stable while the
    /// caller holds the strings, which is one call.
    pub fn begin_call(&mut self) {
        self.recent.fill((0, EMPTY));
    }

    /// Room for `additional` more distinct strings.
    pub fn reserve(&mut self, additional: usize) {
        self.texts.reserve(additional);
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.texts.memory_bytes()
    }

    /// The symbol of an exact `str` (the empty string included).
    #[inline]
    pub fn key(&mut self, value: &Bound<'_, PyAny>, what: &'static str) -> Extracted<Sym> {
        let ptr = value.as_ptr() as usize;
        // Objects are 16-byte aligned.
        let bucket = (ptr >> 4) & (RECENT - 1);
        let (seen, sym) = self.recent[bucket];
        if ptr == seen {
            return Ok(sym);
        }
        let s = value
            .cast_exact::<PyString>()
            .map_err(|_| Outcome::Decline(what))?;
        // Strings with lone surrogates cannot be borrowed as UTF-8; rare
        // enough to leave to the reference implementation.
        let text = s.to_str().map_err(|_| Outcome::Decline(what))?;
        let sym = self
            .texts
            .symbol(text)
            .map_err(|_| Outcome::Decline("too many distinct ids"))?;
        self.recent[bucket] = (ptr, sym);
        Ok(sym)
    }

    /// The symbol of a text that is no Python object the caller keeps (a
    /// record's invocation id): by text, never through the address cache of
    /// [`Interner::key`], where a freed temporary's address, reused by the
    /// next one, would hand back the first text's symbol.
    pub fn text(&mut self, text: &str) -> Extracted<Sym> {
        self.texts
            .symbol(text)
            .map_err(|_| Outcome::Decline("too many distinct ids"))
    }

    /// The symbol of a `str | None` value; `None` and `""` are absent, as
    /// google-adk tests ids for truthiness.
    pub fn optional(
        &mut self,
        value: &Bound<'_, PyAny>,
        what: &'static str,
    ) -> Extracted<Option<Sym>> {
        if value.is_none() {
            return Ok(None);
        }
        Ok(Some(self.key(value, what)?).filter(|&sym| sym != EMPTY))
    }

    /// The symbol of a non-empty `str`, `None` for `""`; a non-`str`
    /// (`None` included) declines, because google-adk compares the value
    /// for equality and `None != ""` there.
    pub fn truthy_str(
        &mut self,
        value: &Bound<'_, PyAny>,
        what: &'static str,
    ) -> Extracted<Option<Sym>> {
        Ok(Some(self.key(value, what)?).filter(|&sym| sym != EMPTY))
    }

    /// The symbol of a `str | None` value, keeping `""` (for equality tests).
    pub fn nullable(
        &mut self,
        value: &Bound<'_, PyAny>,
        what: &'static str,
    ) -> Extracted<Option<Sym>> {
        if value.is_none() {
            Ok(None)
        } else {
            self.key(value, what).map(Some)
        }
    }
}

/// Extracted views of one list of events plus the objects themselves (held
/// so identities stay valid and results can be built without re-reading the
/// list, which a Python callback could mutate).
pub struct Batch<'py> {
    pub objects: Vec<Bound<'py, PyAny>>,
    pub views: Views,
}

/// Reads events into views.
pub struct Extractor<'py> {
    py: Python<'py>,
    types: &'static Types,
    pub interner: Interner,
    /// Arena of function-call / response id symbols the views' spans index.
    pub ids: Vec<Sym>,
    /// Where each field was found last in the dicts read.
    fields: Fields,
}

impl<'py> Extractor<'py> {
    /// A new extractor; imports the model types on first use.
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        Self::with_interner(py, Interner::default())
    }

    /// An extractor that interns into `interner` (a session index's, whose
    /// symbols outlive the call).
    pub fn with_interner(py: Python<'py>, interner: Interner) -> PyResult<Self> {
        Ok(Extractor {
            py,
            types: types(py)?,
            interner,
            ids: Vec::new(),
            fields: Fields::new(py),
        })
    }

    /// [`Extractor::with_interner`] taking `interner` only once nothing can
    /// fail: on an error it stays where it was (an index kept after the
    /// error keeps the symbols its stored views name).
    pub fn taking_interner(py: Python<'py>, interner: &mut Interner) -> PyResult<Self> {
        let types = types(py)?;
        Ok(Extractor {
            py,
            types,
            interner: std::mem::take(interner),
            ids: Vec::new(),
            fields: Fields::new(py),
        })
    }

    /// The list itself; other sequences decline (google-adk accepts any
    /// iterable, and the reference implementation handles those). Exactly
    /// `list`: a subclass may override `__iter__` / `__len__`, which
    /// google-adk goes through and a direct read of the items would not.
    pub fn list<'a>(events: &'a Bound<'py, PyAny>) -> Extracted<&'a Bound<'py, PyList>> {
        events
            .cast_exact::<PyList>()
            .map_err(|_| Outcome::Decline("events is not a list"))
    }

    /// Extracts every event of `list`.
    ///
    /// Work goes stage by stage over chunks of events (all event dicts, then
    /// all `actions`, then their dicts, ...) instead of event by event. The
    /// reads are pointer chases through objects that are usually not in
    /// cache (a session freshly loaded by `get_session`); within one stage
    /// the chases of different events are independent, and before a stage
    /// the loads it makes are started for the whole chunk (see
    /// `prefetch`), so their cache misses overlap, where an event-by-event
    /// loop waits for each.
    pub fn batch(&mut self, list: &Bound<'py, PyList>, need: Need) -> Extracted<Batch<'py>> {
        // Taking the references touches each object header; their loads are
        // started some items ahead.
        let objects: Vec<Bound<'py, PyAny>> = super::prefetch::list_items(list);
        let views = self.views(&objects, need)?;
        Ok(Batch { objects, views })
    }

    /// Extracts every event of `objects`, staged as in [`Extractor::batch`].
    pub fn views(&mut self, objects: &[Bound<'py, PyAny>], need: Need) -> Extracted<Views> {
        // Pooled: a fresh buffer per call would fault in new pages.
        let mut views = Views::with_capacity(objects.len());
        views.resize(objects.len(), EventView::default());
        let mut scratch = Scratch::default();
        for (objs, chunk) in objects.chunks(CHUNK).zip(views.chunks_mut(CHUNK)) {
            self.chunk(objs, chunk, need, &mut scratch)?;
        }
        Ok(views)
    }

    /// Extracts one event (the staged path of [`Extractor::batch`] for a
    /// single object).
    pub fn event(&mut self, obj: &Bound<'py, PyAny>, need: Need) -> Extracted<EventView> {
        let mut view = [EventView::default()];
        self.chunk(
            std::slice::from_ref(obj),
            &mut view,
            need,
            &mut Scratch::default(),
        )?;
        Ok(view[0])
    }

    fn chunk(
        &mut self,
        objs: &[Bound<'py, PyAny>],
        views: &mut [EventView],
        need: Need,
        s: &mut Scratch<'py>,
    ) -> Extracted<()> {
        let py = self.py;
        let t = self.types;
        s.clear();
        // Stage 1: the events' dicts. Before each stage, the loads it makes
        // are started for the whole chunk (see `prefetch`).
        prefetch::instance_dicts(objs);
        for (obj, view) in objs.iter().zip(views.iter_mut()) {
            view.ident = obj.as_ptr() as u64;
            s.dicts.push(model_dict(obj, &t.event, "not an Event")?);
        }
        stage_keys(
            py,
            &mut s.keys,
            &[
                (need.timestamp, &[F::Timestamp]),
                (need.pairing, &[F::LongRunning]),
                (need.invocation, &[F::Invocation]),
                (need.window && t.scoped_events, &[F::Scope]),
                (need.usage, &[F::Author, F::Usage]),
                (
                    need.compaction || need.rewind || need.window || need.pairing,
                    &[F::Actions],
                ),
                (need.parts, &[F::Content]),
            ],
        );
        prefetch::tables(&s.dicts, &s.keys, &self.fields);
        prefetch::values(&s.dicts, &s.keys, &self.fields);
        // Stage 2: top-level fields.
        for (i, dict) in s.dicts.iter().enumerate() {
            if need.timestamp {
                let value = field(&mut self.fields, dict, F::Timestamp)?;
                views[i].timestamp = float_value(&value, "timestamp")?;
            }
            if need.invocation {
                let value = field(&mut self.fields, dict, F::Invocation)?;
                views[i].invocation = if need.window {
                    self.interner.truthy_str(&value, "invocation_id")?
                } else {
                    self.interner.optional(&value, "invocation_id")?
                };
            }
            if need.window && t.scoped_events {
                let scope = field(&mut self.fields, dict, F::Scope)?;
                views[i].scope = self.interner.nullable(&scope, "isolation_scope")?;
            }
            if need.pairing {
                let long_running = field(&mut self.fields, dict, F::LongRunning)?;
                if !long_running.is_none() {
                    // Owned: iterating it allocates an iterator.
                    let set = long_running
                        .to_owned()
                        .cast_into_exact::<PySet>()
                        .map_err(|_| Outcome::Decline("long_running"))?;
                    let start = self.ids.len() as u32;
                    for id in set.iter() {
                        if let Some(sym) = self.interner.optional(&id, "long_running")? {
                            self.ids.push(sym);
                        }
                    }
                    views[i].long_running = span_from(start, &self.ids);
                }
            }
            if need.usage {
                let author = field(&mut self.fields, dict, F::Author)?;
                views[i].author = self.interner.optional(&author, "author")?;
                let usage = field(&mut self.fields, dict, F::Usage)?;
                if !usage.is_none() {
                    s.usages.push((i, usage.to_owned()));
                }
            }
            if need.compaction || need.rewind || need.window || need.pairing {
                let actions = field(&mut self.fields, dict, F::Actions)?;
                if !actions.is_none() {
                    s.inner.push((i, actions.to_owned()));
                } else if need.window {
                    return Err(Outcome::Decline("actions is None"));
                }
            }
            if need.parts {
                let content = field(&mut self.fields, dict, F::Content)?;
                if !content.is_none() {
                    s.contents.push((i, content.to_owned()));
                }
            }
        }
        // Stage 2b: prompt token counts.
        if !s.usages.is_empty() {
            prefetch::instance_dicts(s.usages.iter().map(|(_, u)| u));
            for (i, usage) in s.usages.drain(..) {
                s.inner_dicts
                    .push((i, model_dict(&usage, &t.usage, "usage_metadata")?));
            }
            prefetch::tables(
                s.inner_dicts.iter().map(|(_, d)| d),
                &[F::PromptTokens.keyed(py)],
                &self.fields,
            );
            for (i, usage) in s.inner_dicts.drain(..) {
                let count = field(&mut self.fields, &usage, F::PromptTokens)?;
                if !count.is_none() {
                    let count = count
                        .cast_exact::<PyInt>()
                        .map_err(|_| Outcome::Decline("prompt_token_count"))?;
                    views[i].prompt_tokens = Some(
                        count
                            .extract::<i64>()
                            .map_err(|_| Outcome::Decline("prompt_token_count"))?,
                    );
                }
            }
        }
        // Stage 3: `actions` dicts.
        prefetch::instance_dicts(s.inner.iter().map(|(_, a)| a));
        for (i, actions) in s.inner.drain(..) {
            s.inner_dicts
                .push((i, model_dict(&actions, &t.actions, "actions")?));
        }
        stage_keys(
            py,
            &mut s.keys,
            &[
                (need.rewind, &[F::Rewind]),
                (need.compaction, &[F::Compaction]),
                (need.pairing, &[F::Confirmations, F::AuthConfigs]),
            ],
        );
        prefetch::tables(s.inner_dicts.iter().map(|(_, d)| d), &s.keys, &self.fields);
        if need.compaction {
            prefetch::values(
                s.inner_dicts.iter().map(|(_, d)| d),
                &[F::Compaction.keyed(py)],
                &self.fields,
            );
        }
        // Stage 4: rewind target and compaction.
        for (i, actions) in s.inner_dicts.drain(..) {
            if need.rewind {
                let target = field(&mut self.fields, &actions, F::Rewind)?;
                views[i].rewind_before = self.interner.optional(&target, "rewind")?;
            }
            if need.compaction {
                let c = field(&mut self.fields, &actions, F::Compaction)?;
                if !c.is_none() {
                    // Owned: reading it may create its instance dict.
                    let c = c.to_owned();
                    views[i].compaction =
                        Some(compaction_view(&mut self.fields, &c, &t.compaction)?);
                }
            }
            if need.pairing {
                let start = self.ids.len() as u32;
                for slot in [F::Confirmations, F::AuthConfigs] {
                    // Owned: listing its keys allocates.
                    let pending = field(&mut self.fields, &actions, slot)?.to_owned();
                    if pending.is_none() {
                        continue;
                    }
                    let pending = pending
                        .cast_exact::<PyDict>()
                        .map_err(|_| Outcome::Decline("pending"))?;
                    for k in pending.keys() {
                        let sym = self.interner.key(&k, "pending")?;
                        self.ids.push(sym);
                    }
                }
                views[i].pending = span_from(start, &self.ids);
            }
        }
        if !need.parts {
            return Ok(());
        }
        // Stage 5: `content` dicts and their part lists.
        prefetch::instance_dicts(s.contents.iter().map(|(_, c)| c));
        for (i, content) in s.contents.drain(..) {
            s.inner_dicts
                .push((i, model_dict(&content, &t.content, "content")?));
        }
        let parts_key = [F::Parts.keyed(py)];
        prefetch::tables(
            s.inner_dicts.iter().map(|(_, d)| d),
            &parts_key,
            &self.fields,
        );
        prefetch::values(
            s.inner_dicts.iter().map(|(_, d)| d),
            &parts_key,
            &self.fields,
        );
        for (i, content) in s.inner_dicts.drain(..) {
            let parts = field(&mut self.fields, &content, F::Parts)?;
            if parts.is_none() {
                continue;
            }
            let parts = parts
                .to_owned()
                .cast_into_exact::<PyList>()
                .map_err(|_| Outcome::Decline("parts"))?;
            s.lists.push((i, parts));
        }
        prefetch::arrays(s.lists.iter().map(|(_, l)| l));
        prefetch::items(s.lists.iter().map(|(_, l)| l));
        for (i, parts) in s.lists.drain(..) {
            for part in parts.iter() {
                s.inner.push((i, part));
            }
        }
        // Stage 6: part dicts.
        prefetch::instance_dicts(s.inner.iter().map(|(_, p)| p));
        for (i, part) in s.inner.drain(..) {
            s.inner_dicts.push((i, model_dict(&part, &t.part, "part")?));
        }
        let part_keys = [F::Call.keyed(py), F::Response.keyed(py)];
        prefetch::tables(
            s.inner_dicts.iter().map(|(_, d)| d),
            &part_keys,
            &self.fields,
        );
        prefetch::values(
            s.inner_dicts.iter().map(|(_, d)| d),
            &part_keys,
            &self.fields,
        );
        // Stage 7: calls and responses of each part.
        for (i, part) in s.inner_dicts.drain(..) {
            // Each owned before the next read (a lookup on a dict with other
            // keys than `str` could run Python code).
            let call = field(&mut self.fields, &part, F::Call)?.to_owned();
            let response = field(&mut self.fields, &part, F::Response)?.to_owned();
            s.parts.push((i, call, response));
        }
        prefetch::instance_dicts(
            s.parts
                .iter()
                .flat_map(|(_, c, r)| [c, r])
                .filter(|o| !o.is_none()),
        );
        // Stage 8: their ids, in part order: per event, call ids then
        // response ids, contiguous in the arena.
        let mut k = 0;
        while k < s.parts.len() {
            let i = s.parts[k].0;
            let end = k + s.parts[k..].iter().take_while(|p| p.0 == i).count();
            let calls_start = self.ids.len() as u32;
            for (_, call, _) in &s.parts[k..end] {
                if call.is_none() {
                    continue;
                }
                let call = model_dict(call, &t.function_call, "call")?;
                let id = field(&mut self.fields, &call, F::CallId)?;
                if let Some(sym) = self.interner.optional(&id, "call id")? {
                    self.ids.push(sym);
                    if need.pairing {
                        let name = field(&mut self.fields, &call, F::CallName)?;
                        if is_client_function_name(&name)? {
                            s.hitl.push(sym);
                        }
                    }
                }
            }
            let responses_start = self.ids.len() as u32;
            for (_, _, response) in &s.parts[k..end] {
                if response.is_none() {
                    continue;
                }
                if !views[i].has_responses && !need.timestamp {
                    let value = field(&mut self.fields, &s.dicts[i], F::Timestamp)?;
                    views[i].timestamp = float_value(&value, "timestamp")?;
                }
                views[i].has_responses = true;
                let response = model_dict(response, &t.function_response, "response")?;
                let id = field(&mut self.fields, &response, F::ResponseId)?;
                if let Some(sym) = self.interner.optional(&id, "response id")? {
                    self.ids.push(sym);
                }
            }
            let now = self.ids.len() as u32;
            views[i].calls = Span {
                start: calls_start,
                len: responses_start - calls_start,
            };
            views[i].responses = Span {
                start: responses_start,
                len: now - responses_start,
            };
            if !s.hitl.is_empty() {
                self.ids.append(&mut s.hitl);
                views[i].hitl_calls = span_from(now, &self.ids);
            }
            k = end;
        }
        Ok(())
    }
}

/// Events per stage of [`Extractor::batch`]: enough independent misses to
/// overlap, few enough that a chunk's objects stay in L1/L2 between stages.
pub const CHUNK: usize = 32;

/// Buffers reused across chunks.
#[derive(Default)]
struct Scratch<'py> {
    dicts: Vec<Bound<'py, PyDict>>,
    /// `(event in chunk, object)`: `actions`, then parts.
    inner: Vec<(usize, Bound<'py, PyAny>)>,
    inner_dicts: Vec<(usize, Bound<'py, PyDict>)>,
    contents: Vec<(usize, Bound<'py, PyAny>)>,
    /// `(event in chunk, function_call, function_response)` per part.
    parts: Vec<(usize, Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    /// Synthetic HITL call ids of the event being read.
    hitl: Vec<Sym>,
    /// `(event in chunk, usage_metadata)`.
    usages: Vec<(usize, Bound<'py, PyAny>)>,
    /// `(event in chunk, content.parts)`.
    lists: Vec<(usize, Bound<'py, PyList>)>,
    /// The fields a stage reads (with their [`F`] slots), to prefetch.
    keys: Vec<(&'py Bound<'py, PyString>, usize)>,
}

impl Scratch<'_> {
    fn clear(&mut self) {
        self.dicts.clear();
        self.inner.clear();
        self.inner_dicts.clear();
        self.contents.clear();
        self.parts.clear();
        self.hitl.clear();
        self.keys.clear();
        self.lists.clear();
        self.usages.clear();
    }
}

/// The span from `start` to the arena's end.
fn span_from(start: u32, arena: &[Sym]) -> Span {
    Span {
        start,
        len: arena.len() as u32 - start,
    }
}

/// google-adk's `CLIENT_FUNCTION_CALL_NAMES`: the synthetic calls it issues
/// for credentials, confirmations and input requests.
const CLIENT_FUNCTION_CALL_NAMES: [&str; 3] = [
    "adk_request_credential",
    "adk_request_confirmation",
    "adk_request_input",
];

/// Whether a call's `name` (`str | None`) is a synthetic client call name.
fn is_client_function_name(name: &Bound<'_, PyAny>) -> Extracted<bool> {
    if name.is_none() {
        return Ok(false);
    }
    let name = name
        .cast_exact::<PyString>()
        .map_err(|_| Outcome::Decline("call name"))?;
    let text = name.to_str().map_err(|_| Outcome::Decline("call name"))?;
    Ok(CLIENT_FUNCTION_CALL_NAMES.contains(&text))
}

/// `actions.compaction` (known not to be `None`).
fn compaction_view(
    fields: &mut Fields,
    c: &Bound<'_, PyAny>,
    ty: &Model,
) -> Extracted<CompactionView> {
    let c = model_dict(c, ty, "compaction")?;
    let start = field(fields, &c, F::Start)?;
    let start = optional_float(&start, "start")?;
    let end = field(fields, &c, F::End)?;
    let end = optional_float(&end, "end")?;
    let content = field(fields, &c, F::Compacted)?;
    Ok(CompactionView {
        start,
        end,
        has_content: !content.is_none(),
    })
}
