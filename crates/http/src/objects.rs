//! `/v1/pipes`, `/v1/queues`, `/v1/scheds` and `/N` of each: the objects
//! as `show --json` gives them, PUT as `config`, PATCH as `modify`,
//! DELETE; bodies are the language's options, written as a command and
//! parsed by `dummynet_lang`, so the API and the CLI cannot disagree.

use axum::extract::{Path as UrlPath, State};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Map, Value};

use super::body::JsonBody;
use super::kind::ObjKind;
use super::{applied_json, blocking, shape, ApiError, ApiResult, App};

/// An object number from the URL: 1 to 65535.
fn number(kind: &str, text: &str) -> Result<u32, ApiError> {
    text.parse::<u32>()
        .ok()
        .filter(|n| (1..=dummynet_engine::config::MAX_NUMBER).contains(n))
        .ok_or_else(|| {
            ApiError::new(
                "invalid",
                format!("`{text}` is not a {kind} number (1 to 65535)"),
            )
        })
}

/// The objects numbered `n` (all if empty) as the control protocol's
/// JSON views give them (`pipe show --json`).
pub(super) fn objects_json(kind: ObjKind, snap: &dummynet_engine::Snapshot, n: &[u32]) -> Value {
    let view = match kind {
        ObjKind::Pipe => serde_json::to_value(dummynet_daemon::views::pipes(snap, n)),
        ObjKind::Queue => serde_json::to_value(dummynet_daemon::views::queues(snap, n)),
        ObjKind::Sched => serde_json::to_value(dummynet_daemon::views::scheds(snap, n)),
    };
    view.unwrap_or(Value::Null)
}

/// A pipe's `role` (see [`super::HttpOptions::roles`]) added to its view.
fn with_role(app: &App, kind: ObjKind, mut one: Value) -> Value {
    let n = one["number"].as_u64();
    let role = app.roles.iter().find(|(r, _)| Some(u64::from(*r)) == n);
    if let (ObjKind::Pipe, Some((_, role)), Value::Object(m)) = (kind, role, &mut one) {
        m.insert("role".into(), role.clone().into());
    }
    one
}

pub(super) async fn list_objects(State(app): State<App>, kind: ObjKind) -> ApiResult {
    let roles = app.clone();
    let (snap, _) = blocking(move || app.snapshot()).await??;
    let numbers = kind.numbers(&snap);
    let mut view = objects_json(kind, &snap, &numbers);
    if let Some(Value::Array(list)) = view.get_mut(format!("{}s", kind.word())) {
        for one in list.iter_mut() {
            *one = with_role(&roles, kind, one.take());
        }
    }
    if numbers.is_empty() {
        // No numbers is "all" to the views; here it is none.
        view = json!({ format!("{}s", kind.word()): [] });
    }
    Ok(Json(view).into_response())
}

pub(super) async fn get_object(
    State(app): State<App>,
    kind: ObjKind,
    UrlPath(n): UrlPath<String>,
) -> ApiResult {
    let n = number(kind.word(), &n)?;
    let roles = app.clone();
    let (snap, _) = blocking(move || app.snapshot()).await??;
    if !kind.numbers(&snap).contains(&n) {
        return Err(no_such(kind.word(), n));
    }
    let view = objects_json(kind, &snap, &[n]);
    let one = view[format!("{}s", kind.word())][0].clone();
    Ok(Json(with_role(&roles, kind, one)).into_response())
}

fn no_such(word: &str, n: u32) -> ApiError {
    ApiError::new("not_found", format!("there is no {word} {n}"))
}

/// `PUT` (`config`: the fields given, the rest at their defaults) or
/// `PATCH` (`modify`: a JSON Merge Patch of the GET document; only what it
/// changes changes). The body is the GET document (see [`super::shape`]),
/// the command language's options (`{"bw": "1Mbit/s"}`), or both.
pub(super) async fn put_object(
    State(app): State<App>,
    kind: ObjKind,
    UrlPath(n): UrlPath<String>,
    JsonBody(body): JsonBody,
    modify: bool,
) -> ApiResult {
    let n = number(kind.word(), &n)?;
    let Some(map) = body.as_object() else {
        return Err(not_an_object());
    };
    let (view, options): (Map<String, Value>, Map<String, Value>) = map
        .clone()
        .into_iter()
        .partition(|(k, v)| shape::is_view_field(kind, k, v));
    let verb = if modify { "modify" } else { "config" };
    let (mut words, keys) = option_words(
        &Value::Object(options),
        &[kind.word(), &n.to_string(), verb],
    )?;
    if !modify {
        words.extend(shape::view_words(kind, n, &view, None)?);
    }
    let done = blocking(move || {
        if modify {
            let (snap, _) = app.snapshot()?;
            if !kind.numbers(&snap).contains(&n) {
                return Err(no_such(kind.word(), n));
            }
            if !view.is_empty() {
                let current = objects_json(kind, &snap, &[n])[format!("{}s", kind.word())][0].clone();
                let mut merged = current.clone();
                shape::merge_patch(&mut merged, &Value::Object(view));
                let (Some(base), Some(merged)) = (current.as_object(), merged.as_object()) else {
                    return Err(ApiError::new("internal", "the object's view is not an object"));
                };
                words.extend(shape::view_words(kind, n, merged, Some(base))?);
            }
            if words.len() == 3 {
                return Err(ApiError::new(
                    "invalid",
                    "PATCH changes nothing: give a field to change (read-only fields such as counters are ignored)",
                ));
            }
        }
        app.apply(&words).map_err(|e| name_unknown_field(e, &keys))
    })
    .await??;
    Ok(applied_json(vec![done]))
}

fn not_an_object() -> ApiError {
    ApiError::new(
        "syntax",
        "the body must be a JSON object: the object as GET gives it ({\"link\": {\"delay_ns\": 20000000}}), or the command language's options ({\"bw\": \"10Mbit/s\", \"delay\": \"20ms\"})",
    )
}

pub(super) async fn delete_object(
    State(app): State<App>,
    kind: ObjKind,
    UrlPath(n): UrlPath<String>,
) -> ApiResult {
    let n = number(kind.word(), &n)?;
    let done = blocking(move || {
        let (snap, _) = app.snapshot()?;
        if !kind.numbers(&snap).contains(&n) {
            return Err(no_such(kind.word(), n));
        }
        app.apply(&[kind.word().into(), n.to_string(), "delete".into()])
    })
    .await??;
    Ok(applied_json(vec![done]))
}

/// A command's words, and which of them are option names (index, name).
type OptionWords = (Vec<String>, Vec<(usize, String)>);

/// The command words for a body of options: `prefix`, then each option's
/// name and value. Names are the command language's; a value is a string
/// in its syntax (split at blanks: `"mask": "src-ip 0xffffff00"`), a
/// number (written as the language reads a bare number: `"plr": 0.01`) or
/// `true` for an option without a value (`"noerror": true`). `type` comes
/// first (a scheduler's parameters follow it), the others in name order.
/// Also returns which word of the result is each option's name, so that
/// an error at one names the field.
pub(super) fn option_words(body: &Value, prefix: &[&str]) -> Result<OptionWords, ApiError> {
    let Some(map) = body.as_object() else {
        return Err(not_an_object());
    };
    let mut words: Vec<String> = prefix.iter().map(|w| w.to_string()).collect();
    let mut keys = Vec::new();
    let mut names: Vec<&String> = map.keys().collect();
    names.sort_by_key(|k| (k.as_str() != "type", k.as_str()));
    for name in names {
        let ok_name = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-+.".contains(c));
        if !ok_name {
            return Err(ApiError::new(
                "unknown_field",
                format!("unknown field `{name}`: options are the command language's keywords"),
            )
            .with("field", name.as_str()));
        }
        let bad = |what: &str| {
            ApiError::new(
                "invalid",
                format!("field `{name}`: {what}; give a string in the command language's syntax, a number, or true for an option without a value"),
            )
            .with("field", name.as_str())
        };
        keys.push((words.len(), name.clone()));
        words.push(name.clone());
        match &map[name] {
            Value::String(s) => {
                let before = words.len();
                words.extend(s.split_whitespace().map(String::from));
                if words.len() == before {
                    return Err(bad("an empty value"));
                }
            }
            Value::Number(x) => words.push(x.to_string()),
            Value::Bool(true) => {}
            Value::Bool(false) => return Err(bad("false (leave the option out instead)")),
            Value::Null => return Err(bad("null (leave the option out instead)")),
            Value::Array(_) | Value::Object(_) => return Err(bad("a list or an object")),
        }
    }
    Ok((words, keys))
}

/// A parse error at one of the body's option names is an unknown field,
/// named as such.
pub(super) fn name_unknown_field(mut e: ApiError, keys: &[(usize, String)]) -> ApiError {
    if e.kind != "syntax" {
        return e;
    }
    let Some(token) = e.extra.get("token").and_then(Value::as_str) else {
        return e;
    };
    let Some(col) = e.extra.get("column").and_then(Value::as_u64) else {
        return e;
    };
    let Some(Value::String(command)) = e.extra.get("command") else {
        return e;
    };
    // The word the column falls on (the words are joined by single spaces).
    let mut start = 1u64;
    let mut at = None;
    for (i, w) in command.split(' ').enumerate() {
        let end = start + w.chars().count() as u64;
        if col >= start && col < end.max(start + 1) {
            at = Some(i);
            break;
        }
        start = end + 1;
    }
    if let Some((_, name)) = keys.iter().find(|(i, k)| Some(*i) == at && k == token) {
        let name = name.clone();
        e.message = format!("unknown field `{name}`: {}", e.message);
        if let Some(s) = e.extra.get("suggestion").and_then(Value::as_str) {
            e.message = format!("{}; did you mean `{s}`?", e.message);
        }
        e.kind = "unknown_field";
        e.extra.insert("field".into(), name.into());
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_becomes_command_words() {
        let body = json!({"delay": "20ms", "bw": "10Mbit/s", "plr": 0.01, "noerror": true,
                          "mask": "src-ip 0xffffff00"});
        let (words, keys) = option_words(&body, &["pipe", "1", "config"]).unwrap();
        assert_eq!(
            words.join(" "),
            "pipe 1 config bw 10Mbit/s delay 20ms mask src-ip 0xffffff00 noerror plr 0.01"
        );
        assert_eq!(keys[0], (3, "bw".to_string()));
        // It parses as the same command the CLI would take.
        assert!(dummynet_lang::parse_args(&words).is_ok());
        // `type` first, so a scheduler's parameters follow it.
        let (words, _) = option_words(
            &json!({"quantum": 1514, "type": "fq_codel"}),
            &["sched", "1", "config"],
        )
        .unwrap();
        assert_eq!(words.join(" "), "sched 1 config type fq_codel quantum 1514");
        for bad in [
            json!({"bw": false}),
            json!({"bw": null}),
            json!({"bw": ["1"]}),
            json!({"bw": ""}),
            json!([1]),
        ] {
            assert!(
                option_words(&bad, &["pipe", "1", "config"]).is_err(),
                "{bad}"
            );
        }
        let e = option_words(&json!({"Bw; flush": 1}), &["pipe", "1", "config"]).unwrap_err();
        assert_eq!(e.kind, "unknown_field");
    }

    #[test]
    fn a_parse_error_at_an_option_name_names_the_field() {
        let body = json!({"bw": "1Mbit/s", "dleay": "20ms"});
        let (words, keys) = option_words(&body, &["pipe", "1", "config"]).unwrap();
        let e = dummynet_lang::parse_args(&words).unwrap_err();
        let e = name_unknown_field(ApiError::parse(&e, &words.join(" ")), &keys);
        assert_eq!(e.kind, "unknown_field");
        assert_eq!(e.extra["field"], "dleay");
        assert_eq!(e.extra["suggestion"], "delay");
        // An error in a value is not about a field name.
        let body = json!({"bw": "1Mbit/s", "delay": "20parsecs"});
        let (words, keys) = option_words(&body, &["pipe", "1", "config"]).unwrap();
        let e = dummynet_lang::parse_args(&words).unwrap_err();
        let e = name_unknown_field(ApiError::parse(&e, &words.join(" ")), &keys);
        assert_ne!(e.kind, "unknown_field");
    }
}
