//! Binding of `core::scans`: google-adk's per-event scans of prompt
//! assembly, read natively.
//!
//! Each reads the fields its core decision needs from the instance dicts of
//! objects whose classes read like google-adk's and google-genai's models
//! (`classes`); a value of another kind (a foreign part, a non-`str` author
//! or branch, a subclass overriding `get_function_calls`) declines, and
//! google-adk's own function answers instead (counted and logged once, as
//! every decline is).

use super::dropin::{name_as, reduce, Given, Params};
use super::error::{finish, Extracted, Outcome};
use super::index::load::load;
use super::index::memos::redelivery::same_id_again;
use super::reading::extract::{instance_dict, model_dict, types, Model};
use super::reading::read::{get, optional_model, optional_str, truthy, truthy_str};
use crate::core::event::Need;
use crate::core::scans::{self, BranchEvent, ContextEvent, PartFacts};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PySet, PyString, PyTuple, PyType};
use std::collections::HashSet;

/// The parts of `content` (a Content model's dict, or `None`): `None` when
/// the content or its parts are missing, the list otherwise.
fn parts_of<'py>(content: Option<&Bound<'py, PyDict>>) -> Extracted<Option<Bound<'py, PyList>>> {
    let Some(content) = content else {
        return Ok(None);
    };
    let parts = get(content, intern!(content.py(), "parts"), "parts")?;
    if parts.is_none() {
        return Ok(None);
    }
    parts
        .cast_into_exact::<PyList>()
        .map(Some)
        .map_err(|_| Outcome::Decline("parts"))
}

/// Whether `name` (a call's or response's `name`) is one of `names`.
#[inline]
fn named(name: &Bound<'_, PyAny>, names: &[String; 3]) -> Extracted<bool> {
    Ok(optional_str(name, "call name")?.is_some_and(|name| names.iter().any(|n| n == name)))
}

/// `_should_include_event_in_context` as a drop-in: the native reading of
/// one event, google-adk's own function on a decline. Each instance carries
/// google-adk's function's names (`dropin`).
#[pyclass(frozen, dict, module = "adk_fastcompact._native")]
pub struct ContextFilter {
    original: Py<PyAny>,
    /// `adk_framework`, the credential request's and the confirmation
    /// request's function names, as the module binds them.
    names: [String; 3],
    node_info: Py<PyType>,
}

/// The arguments of one call, checked.
struct Ask<'a> {
    current_branch: Option<&'a str>,
    scope: Option<&'a str>,
    node_path: Option<&'a str>,
    include_thoughts: bool,
}

/// `_should_include_event_in_context`'s parameters.
const CONTEXT_FILTER: Params<5> = Params {
    names: [
        "current_branch",
        "event",
        "isolation_scope",
        "node_path",
        "include_thoughts",
    ],
    positional: 3,
    required: 2,
};

#[pymethods]
impl ContextFilter {
    #[new]
    fn new(
        py: Python<'_>,
        original: Py<PyAny>,
        framework: String,
        credential: String,
        confirmation: String,
        node_info: Py<PyType>,
    ) -> PyResult<Py<Self>> {
        let made = Py::new(
            py,
            ContextFilter {
                original: original.clone_ref(py),
                names: [framework, credential, confirmation],
                node_info,
            },
        )?;
        name_as(made.bind(py), original.bind(py), &CONTEXT_FILTER)?;
        Ok(made)
    }

    /// google-adk's function this drop-in answers for.
    #[getter]
    fn original(&self, py: Python<'_>) -> Py<PyAny> {
        self.original.clone_ref(py)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        reduce(slf)
    }

    #[pyo3(signature = (
        *args,
        current_branch = Given::Missing,
        event = Given::Missing,
        isolation_scope = Given::Missing,
        node_path = Given::Missing,
        include_thoughts = Given::Missing,
        **extra,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        current_branch: Given<'py>,
        event: Given<'py>,
        isolation_scope: Given<'py>,
        node_path: Given<'py>,
        include_thoughts: Given<'py>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let keywords = [
            current_branch,
            event,
            isolation_scope,
            node_path,
            include_thoughts,
        ];
        let original = self.original.bind(py);
        let Some([Some(current_branch), Some(event), isolation_scope, node_path, include_thoughts]) =
            CONTEXT_FILTER.bind(args, &keywords, extra)
        else {
            // google-adk's function raises its own TypeError.
            return CONTEXT_FILTER.call(original, args, &keywords, extra);
        };
        let none = py.None().into_bound(py);
        let verdict = self.decide(
            &current_branch,
            &event,
            isolation_scope.as_deref().unwrap_or(&none),
            node_path.as_deref().unwrap_or(&none),
            include_thoughts.as_deref(),
        );
        if let Some(verdict) = finish(py, "_should_include_event_in_context", verdict)? {
            return Ok(PyBool::new(py, verdict).to_owned().into_any().unbind());
        }
        CONTEXT_FILTER.call(original, args, &keywords, extra)
    }
}

impl ContextFilter {
    fn decide(
        &self,
        current_branch: &Bound<'_, PyAny>,
        event: &Bound<'_, PyAny>,
        isolation_scope: &Bound<'_, PyAny>,
        node_path: &Bound<'_, PyAny>,
        include_thoughts: Option<&Bound<'_, PyAny>>,
    ) -> Extracted<bool> {
        let ask = Ask {
            current_branch: optional_str(current_branch, "branch")?,
            scope: optional_str(isolation_scope, "isolation_scope")?,
            node_path: optional_str(node_path, "node path")?,
            include_thoughts: match include_thoughts {
                Some(value) => truthy(value)?,
                None => false,
            },
        };
        self.read(event, &ask)
    }

    fn read(&self, event: &Bound<'_, PyAny>, ask: &Ask<'_>) -> Extracted<bool> {
        let py = event.py();
        let t = types(py)?;
        let d = model_dict(event, &t.event, "not an Event")?;
        let scope = get(&d, intern!(py, "isolation_scope"), "isolation_scope")?;
        let same_scope = optional_str(&scope, "isolation_scope")? == ask.scope;
        if !same_scope {
            return Ok(scans::include_in_context(
                &ContextEvent::default(),
                ask.current_branch,
                ask.node_path,
            ));
        }
        let info = get(&d, intern!(py, "node_info"), "node_info")?;
        let path_value;
        let node_path = if info.is_none() {
            None
        } else if info.get_type().is(self.node_info.bind(py)) {
            let info = instance_dict(&info)?.ok_or(Outcome::Decline("node_info"))?;
            path_value = get(&info, intern!(py, "path"), "node_info")?;
            truthy_str(&path_value, "node_info")?
        } else {
            return Err(Outcome::Decline("node_info"));
        };
        let author = get(&d, intern!(py, "author"), "author")?;
        let by_user = optional_str(&author, "author")? == Some("user");
        let actions = get(&d, intern!(py, "actions"), "actions")?;
        let compaction = match optional_model(&actions, &t.actions, "actions")? {
            Some(actions) => truthy(&get(&actions, intern!(py, "compaction"), "compaction")?)?,
            None => false,
        };
        let content_value = get(&d, intern!(py, "content"), "content")?;
        let content = optional_model(&content_value, &t.content, "content")?;
        let role = match &content {
            Some(c) => truthy(&get(c, intern!(py, "role"), "content")?)?,
            None => false,
        };
        let parts = parts_of(content.as_ref())?;
        let (visible, framework_call) = match &parts {
            Some(parts) => self.read_parts(parts, ask.include_thoughts)?,
            None => (false, false),
        };
        let transcribed = truthy(&get(
            &d,
            intern!(py, "output_transcription"),
            "transcription",
        )?)? || truthy(&get(
            &d,
            intern!(py, "input_transcription"),
            "transcription",
        )?)?;
        let branch_value = get(&d, intern!(py, "branch"), "branch")?;
        let mut facts = ContextEvent {
            same_scope,
            by_user,
            node_path,
            has_responses: false,
            compaction,
            visible_content: role && visible,
            transcribed,
            branch: truthy_str(&branch_value, "branch")?,
            framework_call,
        };
        if scans::user_rule_asks(&facts, ask.node_path) {
            // google-adk asks the event itself (a method a subclass may
            // override), and only here.
            facts.has_responses =
                truthy(&event.call_method0(intern!(py, "get_function_responses"))?)?;
        }
        Ok(scans::include_in_context(
            &facts,
            ask.current_branch,
            ask.node_path,
        ))
    }

    /// Whether some part is visible, and whether some part calls or answers
    /// one of the framework's function names.
    fn read_parts(
        &self,
        parts: &Bound<'_, PyList>,
        include_thoughts: bool,
    ) -> Extracted<(bool, bool)> {
        let py = parts.py();
        let t = types(py)?;
        let mut visible = false;
        let mut framework = false;
        for part in parts.iter() {
            let p = model_dict(&part, &t.part, "part")?;
            let call = get(&p, intern!(py, "function_call"), "call")?;
            let response = get(&p, intern!(py, "function_response"), "response")?;
            let has_call = truthy(&call)?;
            let has_response = truthy(&response)?;
            if has_call {
                let c = model_dict(&call, &t.function_call, "call")?;
                framework |= named(&get(&c, intern!(py, "name"), "call name")?, &self.names)?;
            }
            if has_response {
                let r = model_dict(&response, &t.function_response, "response")?;
                framework |= named(&get(&r, intern!(py, "name"), "call name")?, &self.names)?;
            }
            if visible {
                continue;
            }
            let facts = PartFacts {
                call_or_response: has_call || has_response,
                signature: truthy(&get(&p, intern!(py, "thought_signature"), "part")?)?,
                server_tool: truthy(&get(&p, intern!(py, "tool_call"), "part")?)?
                    || truthy(&get(&p, intern!(py, "tool_response"), "part")?)?,
                thought: truthy(&get(&p, intern!(py, "thought"), "part")?)?,
                payload: [
                    intern!(py, "text"),
                    intern!(py, "inline_data"),
                    intern!(py, "file_data"),
                    intern!(py, "executable_code"),
                    intern!(py, "code_execution_result"),
                ]
                .into_iter()
                .map(|key| get(&p, key, "part").and_then(|v| Ok(truthy(&v)?)))
                .try_fold(false, |any, v| v.map(|v| any || v))?,
            };
            visible = !scans::part_invisible(facts, include_thoughts);
        }
        Ok((visible, framework))
    }
}

/// `_collect_function_call_ids(events)`: the truthy ids of every function
/// call in the events' parts, as a `set`; `None` to decline. `method` is
/// google-adk's `get_function_calls`: an event whose class overrides it
/// declines.
#[pyfunction]
pub fn function_call_ids<'py>(
    events: &Bound<'py, PyAny>,
    method: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PySet>>> {
    finish(
        events.py(),
        "_collect_function_call_ids",
        call_ids(events, method),
    )
}

fn call_ids<'py>(
    events: &Bound<'py, PyAny>,
    method: &Bound<'py, PyAny>,
) -> Extracted<Bound<'py, PySet>> {
    let py = events.py();
    let t = types(py)?;
    let events = events
        .cast_exact::<PyList>()
        .map_err(|_| Outcome::Decline("not a list"))?;
    let ids = PySet::empty(py)?;
    let mut checked = None;
    let calls = intern!(py, "function_call");
    for event in events.iter() {
        let d = model_dict(&event, &t.event, "not an Event")?;
        own_class(
            &event,
            &[(intern!(py, "get_function_calls"), method)],
            &mut checked,
        )?;
        part_ids(&d, calls, &t.function_call, &mut |id| {
            if truthy(&id)? {
                ids.add(id)?;
            }
            Ok(())
        })?;
    }
    Ok(ids)
}

/// Hands `each` the id of every function call or response (`field`) in
/// `event`'s parts whose id is not `None` (`get_function_calls` /
/// `get_function_responses` as google-adk defines them); returns how many
/// calls or responses there are, ids or not.
fn part_ids<'py>(
    d: &Bound<'py, PyDict>,
    field: &Bound<'py, PyString>,
    model: &Model,
    each: &mut dyn FnMut(Bound<'py, PyAny>) -> Extracted<()>,
) -> Extracted<usize> {
    let py = d.py();
    let t = types(py)?;
    let content_value = get(d, intern!(py, "content"), "content")?;
    if !truthy(&content_value)? {
        return Ok(0);
    }
    let content = model_dict(&content_value, &t.content, "content")?;
    let Some(parts) = parts_of(Some(&content))? else {
        return Ok(0);
    };
    let mut found = 0;
    for part in parts.iter() {
        let p = model_dict(&part, &t.part, "part")?;
        let value = get(&p, field, "part")?;
        if !truthy(&value)? {
            continue;
        }
        found += 1;
        let v = model_dict(&value, model, "call")?;
        let id = get(&v, intern!(py, "id"), "call id")?;
        if !id.is_none() {
            each(id)?;
        }
    }
    Ok(found)
}

/// The text of an id compared as a `str`; anything else declines.
fn id_text(id: &Bound<'_, PyAny>) -> Extracted<String> {
    Ok(optional_str(id, "call id")?
        .ok_or(Outcome::Decline("call id"))?
        .to_owned())
}

/// Checks that `event`'s class answers each named method with google-adk's
/// own (`methods`: name, google-adk's function), remembering the last class
/// that did.
fn own_class<'py>(
    event: &Bound<'py, PyAny>,
    methods: &[(&Bound<'py, PyString>, &Bound<'py, PyAny>)],
    checked: &mut Option<Bound<'py, PyType>>,
) -> Extracted<()> {
    let ty = event.get_type();
    if checked.as_ref().is_some_and(|c| c.is(&ty)) {
        return Ok(());
    }
    for (name, method) in methods {
        if !ty.getattr(*name)?.is(*method) {
            return Err(Outcome::Decline("get_function_calls overridden"));
        }
    }
    *checked = Some(ty);
    Ok(())
}

/// `InvocationContext._get_events` for a context whose agent is not a
/// single-turn node (the caller hands those to google-adk): `events` (the
/// session's) kept where `invocation_id` equals the context's (with
/// `current_invocation`) and where the event matches the context's
/// `branch` (with `current_branch`); a new list, or `None` to decline.
/// `methods` are google-adk's `get_function_calls` and
/// `get_function_responses`.
#[pyfunction]
#[pyo3(signature = (events, invocation_id, branch, current_invocation, current_branch, methods))]
pub fn context_events<'py>(
    events: &Bound<'py, PyAny>,
    invocation_id: &Bound<'py, PyAny>,
    branch: &Bound<'py, PyAny>,
    current_invocation: bool,
    current_branch: bool,
    methods: (Bound<'py, PyAny>, Bound<'py, PyAny>),
) -> PyResult<Option<Bound<'py, PyList>>> {
    let run = || -> Extracted<Bound<'py, PyList>> {
        let py = events.py();
        let t = types(py)?;
        let events = events
            .cast_exact::<PyList>()
            .map_err(|_| Outcome::Decline("not a list"))?;
        let own = optional_str(branch, "branch")?;
        let invocation = if current_invocation {
            Some(
                optional_str(invocation_id, "invocation_id")?
                    .ok_or(Outcome::Decline("invocation_id"))?,
            )
        } else {
            None
        };
        let methods = [
            (intern!(py, "get_function_calls"), &methods.0),
            (intern!(py, "get_function_responses"), &methods.1),
        ];
        let mut checked = None;
        // The calls issued on the branch or below it, gathered once, at the
        // first user response that needs them (as google-adk gathers them).
        let mut branch_calls: Option<HashSet<String>> = None;
        let kept = PyList::empty(py);
        for event in events.iter() {
            let d = model_dict(&event, &t.event, "not an Event")?;
            if let Some(invocation) = invocation {
                let id = get(&d, intern!(py, "invocation_id"), "invocation_id")?;
                if optional_str(&id, "invocation_id")? != Some(invocation) {
                    continue;
                }
            }
            if current_branch {
                let author = get(&d, intern!(py, "author"), "author")?;
                let branch_value = get(&d, intern!(py, "branch"), "branch")?;
                let mut facts = BranchEvent {
                    by_user: optional_str(&author, "author")? == Some("user"),
                    branch: optional_str(&branch_value, "branch")?,
                    answers_elsewhere: false,
                };
                if facts.by_user {
                    own_class(&event, &methods, &mut checked)?;
                    let mut ids = Vec::new();
                    let responses = part_ids(
                        &d,
                        intern!(py, "function_response"),
                        &t.function_response,
                        &mut |id| {
                            ids.push(id_text(&id)?);
                            Ok(())
                        },
                    )?;
                    if let Some(own) = own.filter(|own| !own.is_empty() && responses > 0) {
                        if !ids.is_empty() {
                            if branch_calls.is_none() {
                                branch_calls =
                                    Some(calls_on_branch(events, own, &methods, &mut checked)?);
                            }
                            let calls = branch_calls.as_ref().expect("gathered above");
                            facts.answers_elsewhere =
                                scans::answers_elsewhere(ids.iter().map(String::as_str), calls);
                        }
                    }
                }
                if !scans::branch_match(&facts, own) {
                    continue;
                }
            }
            kept.append(event)?;
        }
        Ok(kept)
    };
    finish(events.py(), "InvocationContext._get_events", run())
}

/// The ids (not `None`) of the calls of every event on branch `own` or
/// below it (`own` non-empty).
fn calls_on_branch<'py>(
    events: &Bound<'py, PyList>,
    own: &str,
    methods: &[(&Bound<'py, PyString>, &Bound<'py, PyAny>)],
    checked: &mut Option<Bound<'py, PyType>>,
) -> Extracted<HashSet<String>> {
    let py = events.py();
    let t = types(py)?;
    let mut ids = HashSet::new();
    for event in events.iter() {
        let d = model_dict(&event, &t.event, "not an Event")?;
        let branch_value = get(&d, intern!(py, "branch"), "branch")?;
        let Some(branch) = optional_str(&branch_value, "branch")? else {
            continue;
        };
        if !scans::on_branch(branch, own) {
            continue;
        }
        own_class(&event, methods, checked)?;
        part_ids(
            &d,
            intern!(py, "function_call"),
            &t.function_call,
            &mut |id| {
                ids.insert(id_text(&id)?);
                Ok(())
            },
        )?;
    }
    Ok(ids)
}

/// Whether `events` (a stored session's) already holds an event with
/// `event`'s id that equals it (`==`, asked only of events with the same
/// id, in order, stopping at the first): `InMemorySessionService`'s
/// re-delivery test. The ids are the session index's
/// (`memos::redelivery`): a list grown since the last test reads only the
/// new events' ids. `None` to decline.
#[pyfunction]
pub fn stored_again<'py>(
    events: &Bound<'py, PyAny>,
    event: &Bound<'py, PyAny>,
) -> PyResult<Option<bool>> {
    let run = || -> Extracted<bool> {
        let py = events.py();
        let t = types(py)?;
        let list = events
            .cast_exact::<PyList>()
            .map_err(|_| Outcome::Decline("not a list"))?;
        let key = intern!(py, "id");
        let own = model_dict(event, &t.event, "not an Event")?;
        let id_value = get(&own, key, "id")?;
        let id = optional_str(&id_value, "id")?.ok_or(Outcome::Decline("id"))?;
        let positions = match same_id_again(list, id)? {
            Some(p) => p,
            None => load(events, Need::NONE)?
                .same_id(id)?
                .ok_or(Outcome::Decline("id"))?,
        };
        // The events with the id first (no Python code runs while their
        // ids are read: a key shared by two ids is told apart here), then
        // their equality, in order.
        let mut same_id = Vec::new();
        for at in positions {
            let stored = list.get_item(at)?;
            let d = model_dict(&stored, &t.event, "not an Event")?;
            let stored_id = get(&d, key, "id")?;
            if optional_str(&stored_id, "id")?.ok_or(Outcome::Decline("id"))? == id {
                same_id.push(stored);
            }
        }
        for stored in same_id {
            if stored.eq(event)? {
                return Ok(true);
            }
        }
        Ok(false)
    };
    finish(events.py(), "InMemorySessionService.append_event", run())
}
