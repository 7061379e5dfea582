//! Events as session stores keep them: one JSON document per event (what
//! `Event.model_dump_json(exclude_none=True)` writes: google-adk's
//! `SqliteSessionService` column `event_data`, a `Session` export's
//! `events`), read into the views the decisions take, without building a
//! pydantic `Event`.
//!
//! Only the fields the decisions read are parsed; everything else (texts,
//! call arguments, tool responses of many KB) is skipped by the parser. A
//! session is read the way the binding layer reads pydantic Events
//! (`py::extract`): the same fields, interned the same way (an empty
//! invocation id reads as none, an empty isolation scope does not), so the
//! decisions on a stored session equal those on it loaded through google-adk
//! (the binding's tests compare them). A field is read under its name or
//! its camelCase alias, as google-adk's models accept either.

use super::event::{CompactionView, EventView, Span, Sym};
use super::texts::Texts;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// google-adk's `CLIENT_FUNCTION_CALL_NAMES`.
const CLIENT_FUNCTION_CALL_NAMES: [&str; 3] = [
    "adk_request_credential",
    "adk_request_confirmation",
    "adk_request_input",
];

/// The fields of one stored Event the decisions read.
#[derive(Debug, Default, Deserialize)]
pub struct StoredEvent<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub invocation_id: Option<Cow<'a, str>>,
    /// `invocationId`, read before `invocation_id` as pydantic reads an
    /// alias before the name (`DatabaseSessionService` adds the name to a
    /// row's JSON, which may carry the alias).
    #[serde(rename = "invocationId", borrow, default)]
    pub invocation_id_alias: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub author: Option<Cow<'a, str>>,
    #[serde(default)]
    pub timestamp: Option<f64>,
    #[serde(alias = "isolationScope", borrow, default)]
    pub isolation_scope: Option<Cow<'a, str>>,
    #[serde(alias = "longRunningToolIds", borrow, default)]
    pub long_running_tool_ids: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    pub content: Option<StoredContent<'a>>,
    #[serde(alias = "usageMetadata", default)]
    pub usage_metadata: Option<StoredUsage>,
    #[serde(borrow, default)]
    pub actions: Option<StoredActions<'a>>,
    #[serde(alias = "customMetadata", default)]
    pub custom_metadata: Option<StoredMetadata>,
    /// What lean loading reads besides the view (`core::lean::Facts`).
    #[serde(borrow, default)]
    pub branch: Option<Cow<'a, str>>,
    #[serde(alias = "nodeInfo", borrow, default)]
    pub node_info: Option<StoredNodeInfo<'a>>,
    #[serde(alias = "errorCode", borrow, default)]
    pub error_code: Option<Cow<'a, str>>,
    #[serde(alias = "cacheMetadata", default, deserialize_with = "present")]
    pub cache_metadata: bool,
    #[serde(alias = "interactionId", borrow, default)]
    pub interaction_id: Option<Cow<'a, str>>,
}

/// `node_info`: only its path is read.
#[derive(Debug, Default, Deserialize)]
pub struct StoredNodeInfo<'a> {
    #[serde(borrow, default)]
    pub path: Option<Cow<'a, str>>,
}

/// `custom_metadata`: only exact mode's coverage record is read (its key is
/// [`super::exact::METADATA_KEY`]).
#[derive(Debug, Default, Deserialize)]
pub struct StoredMetadata {
    #[serde(rename = "adk_fastcompact", default)]
    pub record: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredContent<'a> {
    #[serde(borrow, default)]
    pub parts: Option<Vec<StoredPart<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredPart<'a> {
    #[serde(alias = "functionCall", borrow, default)]
    pub function_call: Option<StoredCall<'a>>,
    #[serde(alias = "functionResponse", borrow, default)]
    pub function_response: Option<StoredResponse<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredCall<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredResponse<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredUsage {
    #[serde(alias = "promptTokenCount", default)]
    pub prompt_token_count: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StoredActions<'a> {
    #[serde(alias = "rewindBeforeInvocationId", borrow, default)]
    pub rewind_before_invocation_id: Option<Cow<'a, str>>,
    #[serde(default)]
    pub compaction: Option<StoredCompaction>,
    #[serde(alias = "requestedToolConfirmations", borrow, default)]
    pub requested_tool_confirmations: Option<Keys<'a>>,
    #[serde(alias = "requestedAuthConfigs", borrow, default)]
    pub requested_auth_configs: Option<Keys<'a>>,
    #[serde(alias = "transferToAgent", borrow, default)]
    pub transfer_to_agent: Option<Cow<'a, str>>,
    #[serde(alias = "agentState", default, deserialize_with = "present")]
    pub agent_state: bool,
    #[serde(alias = "endOfAgent", default)]
    pub end_of_agent: Option<bool>,
}

/// `EventCompaction`: its three fields are required (google-adk's loader
/// refuses an event without them), the summary's text skipped.
#[derive(Debug, Deserialize)]
pub struct StoredCompaction {
    #[serde(alias = "startTimestamp")]
    pub start_timestamp: f64,
    #[serde(alias = "endTimestamp")]
    pub end_timestamp: f64,
    #[serde(alias = "compactedContent", deserialize_with = "present")]
    pub compacted_content: bool,
}

/// Whether a value is there and not `null`, its contents skipped.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.is_some())
}

/// The keys of a JSON object, in document order; the values skipped.
#[derive(Debug, Default)]
pub struct Keys<'a>(pub Vec<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Keys<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeysVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for KeysVisitor<'a> {
            type Value = Keys<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Keys<'a>, M::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<Cow<'a, str>>()? {
                    map.next_value::<IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(KeysVisitor(std::marker::PhantomData))
    }
}

/// Why a stored event cannot be read into a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredError {
    /// Not JSON, or not an Event's shape: the parser's message.
    Json(String),
    /// No timestamp, or one that is not a number.
    Timestamp,
    /// More distinct ids than symbols.
    TooManyIds,
}

impl fmt::Display for StoredError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            StoredError::Json(m) => write!(f, "not a stored Event: {m}"),
            StoredError::Timestamp => f.write_str("no numeric timestamp"),
            StoredError::TooManyIds => f.write_str("too many distinct ids"),
        }
    }
}

impl std::error::Error for StoredError {}

/// Parses one stored Event (UTF-8 JSON).
pub fn parse(json: &[u8]) -> Result<StoredEvent<'_>, StoredError> {
    serde_json::from_slice(json).map_err(|e| StoredError::Json(e.to_string()))
}

/// A session read from its stored events: the views (in the order given),
/// their id arena, the interned texts, each event's id, whether it carries
/// parts a prompt would show, and each compaction event's exact-mode
/// record as stored (unvalidated).
#[derive(Default)]
pub struct StoredSession {
    pub views: Vec<EventView>,
    pub ids: Vec<Sym>,
    pub texts: Texts,
    /// Each event's `id` (`None` where it has none).
    pub event_ids: Vec<Option<String>>,
    /// Each event: `content.parts` holds at least one part.
    pub has_parts: Vec<bool>,
    /// `(position, record)` of each event whose `custom_metadata` holds an
    /// exact-mode record.
    pub records: Vec<(usize, serde_json::Value)>,
}

impl StoredSession {
    /// Reads `events` (one JSON document each) in order; the first event
    /// that cannot be read fails the session, with its position.
    pub fn read<S: AsRef<[u8]>>(events: &[S]) -> Result<StoredSession, (usize, StoredError)> {
        let mut s = StoredSession {
            views: Vec::with_capacity(events.len()),
            ..StoredSession::default()
        };
        let empty = s
            .texts
            .symbol("")
            .map_err(|_| (0, StoredError::TooManyIds))?;
        for (i, json) in events.iter().enumerate() {
            let event = parse(json.as_ref()).map_err(|e| (i, e))?;
            s.push(i, event, empty).map_err(|e| (i, e))?;
        }
        Ok(s)
    }

    /// Reads one more event after those read (at the next position); on an
    /// error nothing is added.
    pub fn append(&mut self, event: StoredEvent<'_>) -> Result<usize, StoredError> {
        let empty = self.sym("")?;
        let at = self.views.len();
        let ids = self.ids.len();
        self.push(at, event, empty)
            .inspect_err(|_| self.ids.truncate(ids))?;
        Ok(at)
    }

    fn sym(&mut self, text: &str) -> Result<Sym, StoredError> {
        self.texts.symbol(text).map_err(|_| StoredError::TooManyIds)
    }

    /// `None` and `""` read as none (the binding's `optional`).
    fn optional(&mut self, text: Option<&str>, empty: Sym) -> Result<Option<Sym>, StoredError> {
        match text {
            None => Ok(None),
            Some(t) => Ok(Some(self.sym(t)?).filter(|&s| s != empty)),
        }
    }

    fn push(&mut self, i: usize, e: StoredEvent<'_>, empty: Sym) -> Result<(), StoredError> {
        let timestamp = e.timestamp.ok_or(StoredError::Timestamp)?;
        let mut view = EventView {
            ident: i as u64,
            timestamp,
            ..EventView::default()
        };
        let invocation = e
            .invocation_id_alias
            .as_deref()
            .or(e.invocation_id.as_deref());
        view.invocation = self.optional(invocation, empty)?;
        view.scope = match e.isolation_scope.as_deref() {
            None => None,
            Some(t) => Some(self.sym(t)?),
        };
        view.author = self.optional(e.author.as_deref(), empty)?;
        view.prompt_tokens = e.usage_metadata.as_ref().and_then(|u| u.prompt_token_count);
        let start = self.ids.len() as u32;
        for id in e.long_running_tool_ids.iter().flatten() {
            let sym = self.sym(id)?;
            self.ids.push(sym);
        }
        view.long_running = self.span_from(start);
        if let Some(actions) = &e.actions {
            view.rewind_before =
                self.optional(actions.rewind_before_invocation_id.as_deref(), empty)?;
            view.compaction = match &actions.compaction {
                None => None,
                Some(c) if !c.compacted_content => {
                    return Err(StoredError::Json("a compaction without content".into()))
                }
                Some(c) => Some(CompactionView {
                    start: Some(c.start_timestamp),
                    end: Some(c.end_timestamp),
                    has_content: true,
                }),
            };
            let start = self.ids.len() as u32;
            for keys in [
                &actions.requested_tool_confirmations,
                &actions.requested_auth_configs,
            ]
            .into_iter()
            .flatten()
            {
                for k in &keys.0 {
                    let sym = self.sym(k)?;
                    self.ids.push(sym);
                }
            }
            view.pending = self.span_from(start);
        }
        let parts = e
            .content
            .as_ref()
            .and_then(|c| c.parts.as_deref())
            .unwrap_or(&[]);
        let calls_start = self.ids.len() as u32;
        let mut hitl = Vec::new();
        for call in parts.iter().filter_map(|p| p.function_call.as_ref()) {
            if let Some(sym) = self.optional(call.id.as_deref(), empty)? {
                self.ids.push(sym);
                if call
                    .name
                    .as_deref()
                    .is_some_and(|n| CLIENT_FUNCTION_CALL_NAMES.contains(&n))
                {
                    hitl.push(sym);
                }
            }
        }
        let responses_start = self.ids.len() as u32;
        for response in parts.iter().filter_map(|p| p.function_response.as_ref()) {
            view.has_responses = true;
            if let Some(sym) = self.optional(response.id.as_deref(), empty)? {
                self.ids.push(sym);
            }
        }
        let now = self.ids.len() as u32;
        view.calls = Span {
            start: calls_start,
            len: responses_start - calls_start,
        };
        view.responses = Span {
            start: responses_start,
            len: now - responses_start,
        };
        if !hitl.is_empty() {
            self.ids.append(&mut hitl);
            view.hitl_calls = self.span_from(now);
        }
        self.views.push(view);
        self.event_ids.push(e.id.as_deref().map(str::to_owned));
        self.has_parts.push(!parts.is_empty());
        if let Some(record) = e.custom_metadata.and_then(|m| m.record) {
            self.records.push((i, record));
        }
        Ok(())
    }

    fn span_from(&self, start: u32) -> Span {
        Span {
            start,
            len: self.ids.len() as u32 - start,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_decisions_take_and_skips_the_rest() {
        let events = [
            r#"{"id":"e1","invocation_id":"inv-1","author":"user","timestamp":1.5,
               "content":{"parts":[{"text":"a long text \" with escapes"}],"role":"user"}}"#,
            r#"{"id":"e2","invocation_id":"inv-1","author":"agent","timestamp":2.0,
               "long_running_tool_ids":["c2"],
               "content":{"parts":[{"function_call":{"id":"c1","name":"lookup","args":{"q":[1,2]}}},
                                   {"function_call":{"id":"c2","name":"adk_request_confirmation"}}]},
               "usage_metadata":{"prompt_token_count":812,"total_token_count":900},
               "actions":{"state_delta":{},"requested_tool_confirmations":{"c2":{"hint":"x"}}}}"#,
            r#"{"id":"e3","invocation_id":"","author":"agent","timestamp":3.0,"isolation_scope":"",
               "content":{"parts":[{"function_response":{"id":"c1","name":"lookup","response":{"r":"x"}}}]}}"#,
            r#"{"id":"e4","invocation_id":"inv-2","author":"user","timestamp":4.0,
               "actions":{"compaction":{"start_timestamp":1.5,"end_timestamp":2.0,
                          "compacted_content":{"parts":[{"text":"s"}],"role":"model"}},
                          "rewind_before_invocation_id":"inv-0"}}"#,
        ];
        let s = StoredSession::read(&events).unwrap();
        let v = &s.views;
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].timestamp, 1.5);
        assert_eq!(v[0].invocation, v[1].invocation);
        assert!(v[0].invocation.is_some());
        assert_eq!(v[2].invocation, None); // "" reads as none
        assert_eq!(v[2].scope.map(|sym| s.texts.text(sym)), Some("")); // "" kept
        assert_eq!(v[1].calls.of(&s.ids).len(), 2);
        assert_eq!(v[1].hitl_calls.of(&s.ids), &v[1].calls.of(&s.ids)[1..]);
        assert_eq!(v[1].long_running.of(&s.ids), &v[1].calls.of(&s.ids)[1..]);
        assert_eq!(v[1].pending.of(&s.ids), &v[1].calls.of(&s.ids)[1..]);
        assert_eq!(v[1].prompt_tokens, Some(812));
        assert!(v[2].has_responses);
        assert_eq!(v[2].responses.of(&s.ids), &v[1].calls.of(&s.ids)[..1]);
        let c = v[3].compaction.unwrap();
        assert_eq!(
            (c.start, c.end, c.has_content),
            (Some(1.5), Some(2.0), true)
        );
        assert!(v[3].rewind_before.is_some());
        assert_eq!(s.event_ids[3].as_deref(), Some("e4"));
        assert_eq!(s.has_parts, [true, true, true, false]);
        assert!(s.records.is_empty());
    }

    #[test]
    fn camel_case_aliases_read_as_the_names_do() {
        let named = [
            r#"{"invocation_id":"i","timestamp":1.0,"isolation_scope":"t","long_running_tool_ids":["c"],
               "content":{"parts":[{"function_call":{"id":"c","name":"adk_request_input"}}]},
               "usage_metadata":{"prompt_token_count":5},
               "actions":{"rewind_before_invocation_id":"r","requested_auth_configs":{"c":{}},
                          "compaction":{"start_timestamp":0.5,"end_timestamp":1.0,"compacted_content":{}}}}"#,
        ];
        let aliased = [
            r#"{"invocationId":"i","timestamp":1.0,"isolationScope":"t","longRunningToolIds":["c"],
               "content":{"parts":[{"functionCall":{"id":"c","name":"adk_request_input"}}]},
               "usageMetadata":{"promptTokenCount":5},
               "actions":{"rewindBeforeInvocationId":"r","requestedAuthConfigs":{"c":{}},
                          "compaction":{"startTimestamp":0.5,"endTimestamp":1.0,"compactedContent":{}}}}"#,
        ];
        let (a, b) = (
            StoredSession::read(&named).unwrap(),
            StoredSession::read(&aliased).unwrap(),
        );
        assert_eq!(format!("{:?}", a.views), format!("{:?}", b.views));
        assert_eq!(a.ids, b.ids);
        // pydantic reads the alias before the name.
        let both = [r#"{"invocation_id":"name","invocationId":"alias","timestamp":1.0}"#];
        let s = StoredSession::read(&both).unwrap();
        assert_eq!(s.texts.text(s.views[0].invocation.unwrap()), "alias");
        // Both spellings of another field: refused (a whole load decides).
        let twice = [r#"{"timestamp":1.0,"isolation_scope":"a","isolationScope":"b"}"#];
        assert!(StoredSession::read(&twice).is_err());
    }

    #[test]
    fn the_exact_record_is_read_under_its_key() {
        assert_eq!(super::super::exact::METADATA_KEY, "adk_fastcompact");
        let events = [r#"{"timestamp":1.0,"custom_metadata":{"app":1,"adk_fastcompact":{"v":1}}}"#];
        let s = StoredSession::read(&events).unwrap();
        assert_eq!(s.records, [(0, serde_json::json!({"v": 1}))]);
    }

    #[test]
    fn a_compaction_without_its_fields_and_bad_rows_are_told_apart() {
        for bad in [
            r#"{"timestamp":1.0,"actions":{"compaction":{"start_timestamp":0.0,"end_timestamp":1.0,"compacted_content":null}}}"#,
            r#"{"timestamp":1.0,"actions":{"compaction":{"start_timestamp":0.0,"compacted_content":{"parts":[]}}}}"#,
            r#"{"timestamp":1.0,"actions":{"compaction":{"start_timestamp":null,"end_timestamp":1.0,"compacted_content":{}}}}"#,
        ] {
            assert!(
                matches!(
                    StoredSession::read(&[bad]).err().unwrap(),
                    (0, StoredError::Json(_))
                ),
                "{bad}"
            );
        }
        let no_time = [r#"{"id":"x"}"#];
        assert_eq!(
            StoredSession::read(&no_time).err().unwrap(),
            (0, StoredError::Timestamp)
        );
        let bad = [r#"{"timestamp":1.0}"#, r#"{"timestamp":"#];
        assert!(matches!(
            StoredSession::read(&bad).err().unwrap(),
            (1, StoredError::Json(_))
        ));
        let wrong = [r#"{"timestamp":"noon"}"#];
        assert!(matches!(
            StoredSession::read(&wrong).err().unwrap(),
            (0, StoredError::Json(_))
        ));
    }
}
