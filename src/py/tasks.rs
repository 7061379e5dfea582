//! Binding of `core::tasks`: google-adk's per-turn scans for task agents,
//! read natively.
//!
//! Both drop-ins call `_apply_rewinds` as google-adk's function does (the
//! name bound at call time) and read the live events it returns from the
//! instance dicts of objects whose classes read like google-adk's and
//! google-genai's models (`classes`). A value of another kind (a foreign
//! part, a non-`str` scope or author, a response that is not a `dict`, a
//! `result` no plain comparison settles) declines, and google-adk's own
//! function answers instead, called with the same arguments (counted and
//! logged once, as every decline is).
//!
//! The events are read as `extract` reads them: stage by stage over chunks
//! of events, the loads of each stage started for the whole chunk first
//! (`prefetch`), fields found at their entry positions (`fields`), so the
//! cache misses of a cold session overlap. The small readers below repeat
//! those of `scans` (kept separate so that the two bindings change
//! independently).

use super::dropin::{name_as, reduce, Given, Params};
use super::error::{finish, Extracted, Outcome};
use super::reading::extract::{model_dict, types, CHUNK};
use super::reading::fields::Fields;
use super::reading::prefetch;
use super::reading::read::{get, optional_model, optional_str, truthy_str};
use crate::core::tasks::{self, Reply, ScopeEvent};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyNone, PyString, PyTuple};

/// The [`Fields`] slot of each field read (one per model and key).
mod slot {
    pub const ERROR_CODE: usize = 0;
    pub const INVOCATION: usize = 1;
    pub const SCOPE: usize = 2;
    pub const ACTIONS: usize = 3;
    pub const COMPACTION: usize = 4;
    pub const AUTHOR: usize = 5;
    pub const CONTENT: usize = 6;
    pub const PARTS: usize = 7;
    pub const CALL: usize = 8;
    pub const RESPONSE: usize = 9;
    pub const CALL_NAME: usize = 10;
    pub const CALL_ID: usize = 11;
    pub const RESPONSE_ID: usize = 12;
}

/// `dict[key]` through `fields` (borrowed: used before any Python code
/// runs), declining with `what` when the key is missing.
#[inline]
fn field<'a, 'py>(
    fields: &mut Fields,
    dict: &'a Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
    slot: usize,
    what: &'static str,
) -> Extracted<Borrowed<'a, 'py, PyAny>> {
    fields.get(dict, key, slot)?.ok_or(Outcome::Decline(what))
}

/// The parts of an event's content when `content and content.parts` is
/// true (a Content model with a non-empty list); `None` otherwise.
fn parts<'py>(event: &Bound<'py, PyDict>) -> Extracted<Option<Bound<'py, PyList>>> {
    let py = event.py();
    let t = types(py)?;
    let value = get(event, intern!(py, "content"), "content")?;
    let Some(content) = optional_model(&value, &t.content, "content")? else {
        return Ok(None);
    };
    let parts = get(&content, intern!(py, "parts"), "parts")?;
    if parts.is_none() {
        return Ok(None);
    }
    let parts = parts
        .cast_into_exact::<PyList>()
        .map_err(|_| Outcome::Decline("parts"))?;
    Ok((!parts.is_empty()).then_some(parts))
}

/// `_find_active_task_scope` as a drop-in: google-adk's two passes over the
/// live events, read natively; google-adk's own function on a decline.
/// Each instance carries google-adk's function's names (`dropin`).
#[pyclass(frozen, dict, module = "adk_fastcompact._native")]
pub struct TaskScope {
    original: Py<PyAny>,
    /// The module whose `_apply_rewinds` google-adk's function calls.
    module: Py<PyAny>,
    /// `FINISH_TASK_TOOL_NAME`, `FINISH_TASK_SUCCESS_RESULT`,
    /// `FINISH_TASK_ERROR_RESULT`, as the module binds them.
    finish: String,
    success: String,
    error: String,
    /// The error code of an abort event (`_is_abort_event`).
    aborted: String,
}

/// `_find_active_task_scope`'s parameters.
const TASK_SCOPE: Params<1> = Params {
    names: ["session"],
    positional: 1,
    required: 1,
};

/// What the passes keep of one event: its values, read and checked.
struct Read<'py> {
    invocation: Bound<'py, PyAny>,
    scope: Bound<'py, PyAny>,
    aborted: bool,
    closes: bool,
    compaction: bool,
}

#[pymethods]
impl TaskScope {
    #[new]
    fn new(
        py: Python<'_>,
        original: Py<PyAny>,
        module: Py<PyAny>,
        finish: String,
        success: String,
        error: String,
        aborted: String,
    ) -> PyResult<Py<Self>> {
        let made = Py::new(
            py,
            TaskScope {
                original: original.clone_ref(py),
                module,
                finish,
                success,
                error,
                aborted,
            },
        )?;
        name_as(made.bind(py), original.bind(py), &TASK_SCOPE)?;
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

    #[pyo3(signature = (*args, session = Given::Missing, **extra))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        session: Given<'py>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let keywords = [session];
        let original = self.original.bind(py);
        let Some([Some(session)]) = TASK_SCOPE.bind(args, &keywords, extra) else {
            // google-adk's function raises its own TypeError.
            return TASK_SCOPE.call(original, args, &keywords, extra);
        };
        let apply = self
            .module
            .bind(py)
            .getattr(intern!(py, "_apply_rewinds"))?;
        let events = apply.call1((session.getattr(intern!(py, "events"))?,))?;
        match finish(py, "_find_active_task_scope", self.scan(&events))? {
            Some(Some(found)) => Ok(found.into_any().unbind()),
            Some(None) => Ok(py.None()),
            None => TASK_SCOPE.call(original, args, &keywords, extra),
        }
    }
}

impl TaskScope {
    /// The active scope's `(isolation_scope, invocation_id)`, the very
    /// objects google-adk returns, or `None`.
    fn scan<'py>(&self, events: &Bound<'py, PyAny>) -> Extracted<Option<Bound<'py, PyTuple>>> {
        let py = events.py();
        let t = types(py)?;
        let list = events
            .cast_exact::<PyList>()
            .map_err(|_| Outcome::Decline("not a list"))?;
        let mut fields = Fields::new(py);
        let (k_code, k_invocation, k_scope, k_actions, k_compaction) = (
            intern!(py, "error_code"),
            intern!(py, "invocation_id"),
            intern!(py, "isolation_scope"),
            intern!(py, "actions"),
            intern!(py, "compaction"),
        );
        let top = [
            (k_code, slot::ERROR_CODE),
            (k_invocation, slot::INVOCATION),
            (k_scope, slot::SCOPE),
            (k_actions, slot::ACTIONS),
        ];
        let objects = prefetch::list_items(list);
        let mut reads: Vec<Read<'py>> = Vec::with_capacity(objects.len());
        let mut dicts = Vec::with_capacity(CHUNK);
        let mut actions: Vec<(usize, Bound<'py, PyAny>)> = Vec::with_capacity(CHUNK);
        let mut action_dicts: Vec<(usize, Bound<'py, PyDict>)> = Vec::with_capacity(CHUNK);
        for chunk in objects.chunks(CHUNK) {
            // The events' dicts, then their fields (`_is_abort_event`, the
            // scope, the invocation, `actions`).
            dicts.clear();
            prefetch::instance_dicts(chunk);
            for event in chunk {
                dicts.push(model_dict(event, &t.event, "not an Event")?);
            }
            prefetch::tables(&dicts, &top, &fields);
            prefetch::values(&dicts, &top[3..], &fields);
            for d in &dicts {
                let code = field(&mut fields, d, k_code, slot::ERROR_CODE, "error_code")?;
                let aborted = optional_str(&code, "error_code")? == Some(self.aborted.as_str());
                // Each value owned before the next read: a lookup in a dict
                // with keys other than `str` could run Python code, and so
                // could reading the parts below.
                let invocation = field(
                    &mut fields,
                    d,
                    k_invocation,
                    slot::INVOCATION,
                    "invocation_id",
                )?
                .to_owned();
                optional_str(&invocation, "invocation_id")?;
                let scope =
                    field(&mut fields, d, k_scope, slot::SCOPE, "isolation_scope")?.to_owned();
                // Scoped events are few: their parts are read as met.
                let closes = match truthy_str(&scope, "isolation_scope")? {
                    Some(_) => self.closes(d)?,
                    None => false,
                };
                let action = field(&mut fields, d, k_actions, slot::ACTIONS, "actions")?;
                if !action.is_none() {
                    actions.push((reads.len(), action.to_owned()));
                }
                reads.push(Read {
                    invocation,
                    scope,
                    aborted,
                    closes,
                    compaction: false,
                });
            }
            // `actions.compaction` (a model, or `None`).
            prefetch::instance_dicts(actions.iter().map(|(_, a)| a));
            for (k, action) in actions.drain(..) {
                action_dicts.push((k, model_dict(&action, &t.actions, "actions")?));
            }
            let keys = [(k_compaction, slot::COMPACTION)];
            prefetch::tables(action_dicts.iter().map(|(_, d)| d), &keys, &fields);
            prefetch::values(action_dicts.iter().map(|(_, d)| d), &keys, &fields);
            for (k, d) in action_dicts.drain(..) {
                let c = field(
                    &mut fields,
                    &d,
                    k_compaction,
                    slot::COMPACTION,
                    "compaction",
                )?;
                if !c.is_none() {
                    if !t.compaction.accepts(&c.get_type()) {
                        return Err(Outcome::Decline("compaction"));
                    }
                    reads[k].compaction = true;
                }
            }
        }
        let facts = reads
            .iter()
            .map(|r| {
                Ok(ScopeEvent {
                    aborted: r.aborted,
                    invocation: optional_str(&r.invocation, "invocation_id")?,
                    scope: truthy_str(&r.scope, "isolation_scope")?,
                    closes: r.closes,
                    compaction: r.compaction,
                })
            })
            .collect::<Extracted<Vec<_>>>()?;
        let Some(i) = tasks::active_scope(&facts) else {
            return Ok(None);
        };
        let found = &reads[i];
        Ok(Some(PyTuple::new(py, [&found.scope, &found.invocation])?))
    }

    /// Whether a scoped event's parts close its scope: the first
    /// `finish_task` response decides (see `tasks::reply_closes`).
    fn closes(&self, event: &Bound<'_, PyDict>) -> Extracted<bool> {
        let py = event.py();
        let t = types(py)?;
        let Some(parts) = parts(event)? else {
            return Ok(false);
        };
        for part in parts.iter() {
            let p = model_dict(&part, &t.part, "part")?;
            let response = get(&p, intern!(py, "function_response"), "response")?;
            if response.is_none() {
                continue;
            }
            let r = model_dict(&response, &t.function_response, "response")?;
            let name = get(&r, intern!(py, "name"), "response name")?;
            if optional_str(&name, "response name")? != Some(self.finish.as_str()) {
                continue;
            }
            let result = result_of(&r)?;
            let reply = Reply::Finish(match &result {
                Some(value) => optional_str(value, "result")?,
                None => None,
            });
            if let Some(closes) = tasks::reply_closes(reply, &self.success, &self.error) {
                return Ok(closes);
            }
        }
        Ok(false)
    }
}

/// `(fr.response or {}).get('result')` of a FunctionResponse's dict, when
/// it is an exact `str`; `None` for a missing one or a value of a builtin
/// kind no `str` equals (its `in` test is false). Declines on a response
/// that is not a `dict` and on a result of any other kind (whose equality
/// google-adk's code would ask).
fn result_of<'py>(response: &Bound<'py, PyDict>) -> Extracted<Option<Bound<'py, PyAny>>> {
    let py = response.py();
    let value = get(response, intern!(py, "response"), "response")?;
    if value.is_none() {
        return Ok(None);
    }
    let dict = value
        .cast_exact::<PyDict>()
        .map_err(|_| Outcome::Decline("response not a dict"))?;
    let Some(result) = dict.get_item(intern!(py, "result"))? else {
        return Ok(None);
    };
    if result.is_exact_instance_of::<PyString>() {
        return Ok(Some(result));
    }
    let never_a_str = result.is_exact_instance_of::<PyNone>()
        || result.is_exact_instance_of::<PyBool>()
        || result.is_exact_instance_of::<PyInt>()
        || result.is_exact_instance_of::<PyFloat>()
        || result.is_exact_instance_of::<PyList>()
        || result.is_exact_instance_of::<PyDict>()
        || result.is_exact_instance_of::<PyTuple>();
    if never_a_str {
        Ok(None)
    } else {
        Err(Outcome::Decline("result"))
    }
}

/// `_find_unresolved_task_delegations` as a drop-in: google-adk's scan of
/// the live events, read natively, asking `tools_dict` and `isinstance`
/// exactly where and in the order google-adk does; google-adk's own
/// function on a decline. Each instance carries google-adk's function's
/// names (`dropin`).
#[pyclass(frozen, dict, module = "adk_fastcompact._native")]
pub struct TaskDelegations {
    original: Py<PyAny>,
    /// The modules google-adk's function imports `_apply_rewinds` and
    /// `_TaskAgentTool` from, at every call.
    rewinds: Py<PyString>,
    tools: Py<PyString>,
}

/// `_find_unresolved_task_delegations`'s parameters.
const TASK_DELEGATIONS: Params<4> = Params {
    names: ["session", "owner", "tools_dict", "isolation_scope"],
    positional: 4,
    required: 3,
};

/// A function call google-adk asks `tools_dict` about: the call, its id
/// and its name.
struct Ask<'py> {
    call: Bound<'py, PyAny>,
    id: Bound<'py, PyAny>,
    name: Bound<'py, PyAny>,
}

#[pymethods]
impl TaskDelegations {
    #[new]
    fn new(
        py: Python<'_>,
        original: Py<PyAny>,
        rewinds: Py<PyString>,
        tools: Py<PyString>,
    ) -> PyResult<Py<Self>> {
        let made = Py::new(
            py,
            TaskDelegations {
                original: original.clone_ref(py),
                rewinds,
                tools,
            },
        )?;
        name_as(made.bind(py), original.bind(py), &TASK_DELEGATIONS)?;
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
        session = Given::Missing,
        owner = Given::Missing,
        tools_dict = Given::Missing,
        isolation_scope = Given::Missing,
        **extra,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        session: Given<'py>,
        owner: Given<'py>,
        tools_dict: Given<'py>,
        isolation_scope: Given<'py>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let keywords = [session, owner, tools_dict, isolation_scope];
        let original = self.original.bind(py);
        let Some([Some(session), Some(owner), Some(tools_dict), isolation_scope]) =
            TASK_DELEGATIONS.bind(args, &keywords, extra)
        else {
            // google-adk's function raises its own TypeError.
            return TASK_DELEGATIONS.call(original, args, &keywords, extra);
        };
        let none = py.None().into_bound(py);
        let isolation_scope = isolation_scope.as_deref().unwrap_or(&none);
        // google-adk's function imports both names first, at every call.
        let apply = py
            .import(self.rewinds.bind(py))?
            .getattr(intern!(py, "_apply_rewinds"))?;
        let task_tool = py
            .import(self.tools.bind(py))?
            .getattr(intern!(py, "_TaskAgentTool"))?;
        let events = apply.call1((session.getattr(intern!(py, "events"))?,))?;
        let found = scan(&events, &owner, &tools_dict, isolation_scope, &task_tool);
        if let Some(found) = finish(py, "_find_unresolved_task_delegations", found)? {
            return Ok(found.into_any().unbind());
        }
        TASK_DELEGATIONS.call(original, args, &keywords, extra)
    }
}

/// The unresolved task delegations of `owner`: every event is read (and
/// may decline) before `tools_dict` and `isinstance` are asked about any
/// call, so a decline never repeats a call google-adk's function then
/// makes; an exception they raise is google-adk's, raised after the same
/// calls.
fn scan<'py>(
    events: &Bound<'py, PyAny>,
    owner: &Bound<'py, PyAny>,
    tools_dict: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    task_tool: &Bound<'py, PyAny>,
) -> Extracted<Bound<'py, PyList>> {
    let py = events.py();
    let list = events
        .cast_exact::<PyList>()
        .map_err(|_| Outcome::Decline("not a list"))?;
    let owner = optional_str(owner, "owner")?;
    let wanted = optional_str(isolation_scope, "isolation_scope")?;
    let (asks, responses) = read_calls(list, owner, wanted)?;
    // `isinstance(tools_dict.get(tool_name), _TaskAgentTool)`, call by call.
    let dict = tools_dict.cast_exact::<PyDict>().ok();
    let mut delegations: Vec<usize> = Vec::new();
    for (k, ask) in asks.iter().enumerate() {
        let tool = match &dict {
            // `dict.get` itself: an exact dict's method cannot be replaced.
            Some(dict) => dict.get_item(&ask.name)?,
            None => Some(tools_dict.call_method1(intern!(py, "get"), (&ask.name,))?),
        };
        let tool = tool.unwrap_or_else(|| py.None().into_bound(py));
        if tool.is_instance(task_tool)? {
            delegations.push(k);
        }
    }
    if delegations.is_empty() {
        return Ok(PyList::empty(py));
    }
    // Every id below was read as a `str` already: these cannot decline.
    let ids = delegations
        .iter()
        .map(|&k| Ok((optional_str(&asks[k].id, "call id")?.unwrap_or(""), k)))
        .collect::<Extracted<Vec<_>>>()?;
    let answered = responses
        .iter()
        .map(|id| Ok(optional_str(id, "response id")?.unwrap_or("")))
        .collect::<Extracted<Vec<_>>>()?;
    let kept = tasks::unresolved(ids, answered);
    Ok(PyList::new(py, kept.iter().map(|&k| &asks[k].call))?)
}

/// What the scan reads, in google-adk's order: the calls it asks
/// `tools_dict` about and the truthy ids of the function responses of the
/// events of `owner` and the user. Nothing here runs Python code.
#[allow(clippy::type_complexity)]
fn read_calls<'py>(
    list: &Bound<'py, PyList>,
    owner: Option<&str>,
    wanted: Option<&str>,
) -> Extracted<(Vec<Ask<'py>>, Vec<Bound<'py, PyAny>>)> {
    let py = list.py();
    let t = types(py)?;
    let mut fields = Fields::new(py);
    let (k_author, k_content, k_scope, k_parts) = (
        intern!(py, "author"),
        intern!(py, "content"),
        intern!(py, "isolation_scope"),
        intern!(py, "parts"),
    );
    let (k_call, k_response, k_name, k_id) = (
        intern!(py, "function_call"),
        intern!(py, "function_response"),
        intern!(py, "name"),
        intern!(py, "id"),
    );
    let top = [
        (k_author, slot::AUTHOR),
        (k_content, slot::CONTENT),
        (k_scope, slot::SCOPE),
    ];
    let top = if wanted.is_some() {
        &top[..]
    } else {
        &top[..2]
    };
    let objects = prefetch::list_items(list);
    let mut asks: Vec<Ask<'py>> = Vec::new();
    let mut responses: Vec<Bound<'py, PyAny>> = Vec::new();
    let mut dicts = Vec::with_capacity(CHUNK);
    let mut contents: Vec<(usize, Bound<'py, PyAny>)> = Vec::new();
    let mut content_dicts: Vec<(usize, Bound<'py, PyDict>)> = Vec::new();
    let mut lists: Vec<(bool, Bound<'py, PyList>)> = Vec::new();
    let mut parts: Vec<(bool, Bound<'py, PyAny>)> = Vec::new();
    let mut part_dicts: Vec<(bool, Bound<'py, PyDict>)> = Vec::new();
    let mut pairs: Vec<(bool, Bound<'py, PyAny>, Bound<'py, PyAny>)> = Vec::new();
    let mut leaves: Vec<Leaf<'py>> = Vec::new();
    for chunk in objects.chunks(CHUNK) {
        // The events' dicts; `author` and `content`.
        dicts.clear();
        prefetch::instance_dicts(chunk);
        for event in chunk {
            dicts.push(model_dict(event, &t.event, "not an Event")?);
        }
        prefetch::tables(&dicts, top, &fields);
        prefetch::values(&dicts, &top[1..2], &fields);
        for (i, d) in dicts.iter().enumerate() {
            let author = field(&mut fields, d, k_author, slot::AUTHOR, "author")?;
            if !tasks::owner_reads(optional_str(&author, "author")?, owner) {
                continue;
            }
            let content = field(&mut fields, d, k_content, slot::CONTENT, "content")?;
            if !content.is_none() {
                contents.push((i, content.to_owned()));
            }
        }
        // `content.parts`, when a non-empty list; the event's scope then.
        prefetch::instance_dicts(contents.iter().map(|(_, c)| c));
        for (i, content) in contents.drain(..) {
            content_dicts.push((i, model_dict(&content, &t.content, "content")?));
        }
        let keys = [(k_parts, slot::PARTS)];
        prefetch::tables(content_dicts.iter().map(|(_, d)| d), &keys, &fields);
        prefetch::values(content_dicts.iter().map(|(_, d)| d), &keys, &fields);
        for (i, content) in content_dicts.drain(..) {
            let value = field(&mut fields, &content, k_parts, slot::PARTS, "parts")?;
            if value.is_none() {
                continue;
            }
            let value = value
                .to_owned()
                .cast_into_exact::<PyList>()
                .map_err(|_| Outcome::Decline("parts"))?;
            if value.is_empty() {
                continue;
            }
            let in_scope = match wanted {
                None => true,
                Some(_) => {
                    let scope = field(
                        &mut fields,
                        &dicts[i],
                        k_scope,
                        slot::SCOPE,
                        "isolation_scope",
                    )?;
                    tasks::call_in_scope(wanted, optional_str(&scope, "isolation_scope")?)
                }
            };
            lists.push((in_scope, value));
        }
        // The parts, their dicts, their calls and responses.
        prefetch::arrays(lists.iter().map(|(_, l)| l));
        prefetch::items(lists.iter().map(|(_, l)| l));
        for (in_scope, value) in lists.drain(..) {
            parts.extend(value.iter().map(|part| (in_scope, part)));
        }
        prefetch::instance_dicts(parts.iter().map(|(_, p)| p));
        for (in_scope, part) in parts.drain(..) {
            part_dicts.push((in_scope, model_dict(&part, &t.part, "part")?));
        }
        let keys = [(k_call, slot::CALL), (k_response, slot::RESPONSE)];
        prefetch::tables(part_dicts.iter().map(|(_, d)| d), &keys, &fields);
        prefetch::values(part_dicts.iter().map(|(_, d)| d), &keys, &fields);
        for (in_scope, part) in part_dicts.drain(..) {
            let call = field(&mut fields, &part, k_call, slot::CALL, "call")?.to_owned();
            let response =
                field(&mut fields, &part, k_response, slot::RESPONSE, "response")?.to_owned();
            pairs.push((in_scope, call, response));
        }
        prefetch::instance_dicts(
            pairs
                .iter()
                .flat_map(|(_, c, r)| [c, r])
                .filter(|o| !o.is_none()),
        );
        for (in_scope, call, response) in pairs.drain(..) {
            let call_dict = match call.is_none() {
                true => None,
                false => Some(model_dict(&call, &t.function_call, "call")?),
            };
            let response = match response.is_none() {
                true => None,
                false => Some(model_dict(&response, &t.function_response, "response")?),
            };
            leaves.push(Leaf {
                in_scope,
                call,
                call_dict,
                response,
            });
        }
        prefetch::tables(
            leaves.iter().filter_map(|l| l.call_dict.as_ref()),
            &[(k_name, slot::CALL_NAME), (k_id, slot::CALL_ID)],
            &fields,
        );
        prefetch::tables(
            leaves.iter().filter_map(|l| l.response.as_ref()),
            &[(k_id, slot::RESPONSE_ID)],
            &fields,
        );
        // Per part, in order: the call (`fc.name` read whenever there is a
        // call, `fc.id` only in scope), then the response's id.
        for leaf in leaves.drain(..) {
            if let Some(c) = &leaf.call_dict {
                let name = field(&mut fields, c, k_name, slot::CALL_NAME, "call name")?.to_owned();
                let named = optional_str(&name, "call name")?.is_some();
                if leaf.in_scope {
                    let id = field(&mut fields, c, k_id, slot::CALL_ID, "call id")?;
                    let id_truthy = truthy_str(&id, "call id")?.is_some();
                    if tasks::asks(leaf.in_scope, true, id_truthy, named) {
                        asks.push(Ask {
                            call: leaf.call.clone(),
                            id: id.to_owned(),
                            name,
                        });
                    }
                }
            }
            if let Some(r) = &leaf.response {
                let id = field(&mut fields, r, k_id, slot::RESPONSE_ID, "response id")?;
                if truthy_str(&id, "response id")?.is_some() {
                    responses.push(id.to_owned());
                }
            }
        }
    }
    Ok((asks, responses))
}

/// One part as the last stage reads it.
struct Leaf<'py> {
    in_scope: bool,
    call: Bound<'py, PyAny>,
    call_dict: Option<Bound<'py, PyDict>>,
    response: Option<Bound<'py, PyDict>>,
}
