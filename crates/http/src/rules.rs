//! `/v1/rules` and `/v1/rules/N`: the rules as `ipfw --json -d show`
//! gives them; POST adds, PUT replaces one rule or the whole ruleset in
//! one step, DELETE removes.

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Map, Value};

use super::body::JsonBody;
use super::commands::apply_batch;
use super::{applied_json, blocking, ApiError, ApiResult, App};

fn rule_number(text: &str) -> Result<u16, ApiError> {
    text.parse::<u16>().ok().filter(|n| *n >= 1).ok_or_else(|| {
        ApiError::new(
            "invalid",
            format!("`{text}` is not a rule number (1 to 65535)"),
        )
    })
}

/// `ipfw --json -d show [N]`'s view: the rules numbered `numbers` (all if
/// empty) and the dynamic rules they made.
fn rules_json(
    snap: &dummynet_engine::Snapshot,
    numbers: &[u16],
) -> dummynet_daemon::views::RulesJson {
    let mut view = dummynet_daemon::views::rules(snap, numbers, true);
    if let Some(states) = &mut view.states {
        states.retain(|st| numbers.is_empty() || numbers.contains(&st.rule));
    }
    view
}

pub(super) async fn list_rules(State(app): State<App>) -> ApiResult {
    let (snap, _) = blocking(move || app.snapshot()).await??;
    Ok(Json(rules_json(&snap, &[])).into_response())
}

pub(super) async fn get_rule(State(app): State<App>, UrlPath(n): UrlPath<String>) -> ApiResult {
    let n = rule_number(&n)?;
    let (snap, _) = blocking(move || app.snapshot()).await??;
    let view = rules_json(&snap, &[n]);
    if view.rules.is_empty() {
        return Err(ApiError::new("not_found", format!("there is no rule {n}")));
    }
    Ok(Json(view).into_response())
}

/// The fields of a rule as GET gives it that are shown, not set.
const READ_ONLY: &[&str] = &["packets", "bytes", "last_match_ns", "logged", "default"];

/// One rule's `add` words from `{"rule": "pipe 1 ip from any to any"}`, or
/// from the rule as GET gives it (`{"number": 100, "set": 3, "rule":
/// "...", "packets": ...}`: `set` is kept, the counters are ignored, and
/// `number` must be the URL's, `url`, when there is one). `at` names the
/// object in errors (`rules[2]`).
fn rule_entry(m: &Map<String, Value>, url: Option<u16>, at: &str) -> Result<Vec<String>, ApiError> {
    let field = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    let known = ["rule", "set", "number"];
    if let Some(extra) = m
        .keys()
        .find(|k| !known.contains(&k.as_str()) && !READ_ONLY.contains(&k.as_str()))
    {
        let mut all: Vec<&'static str> = known.to_vec();
        all.extend(READ_ONLY);
        let mut e = ApiError::new(
            "unknown_field",
            format!(
                "unknown field `{}`: a rule is given as {{\"rule\": \"ACTION BODY\"}}, with `number` and `set` if wanted",
                field(extra)
            ),
        )
        .with("field", field(extra));
        if let Some(s) = dummynet_lang::suggest(extra, &all) {
            e.message.push_str(&format!("; did you mean `{s}`?"));
            e = e.with("suggestion", s);
        }
        return Err(e);
    }
    if m.get("default").and_then(Value::as_bool) == Some(true) {
        return Err(ApiError::new(
            "invalid",
            format!(
                "`{}`: the default rule cannot be set; leave it out",
                field("default")
            ),
        )
        .with("field", field("default")));
    }
    let rule = m.get("rule").and_then(Value::as_str).ok_or_else(|| {
        ApiError::new(
            "invalid",
            format!(
                "`{}` is required: a string such as \"pipe 1 ip from any to any\"",
                field("rule")
            ),
        )
        .with("field", field("rule"))
    })?;
    let number = match m.get("number") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let n = v
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n >= 1);
            match (n, url) {
                (Some(n), Some(u)) if n != u => {
                    return Err(ApiError::new(
                        "invalid",
                        format!("`{}` is {n}, not this rule's number ({u}, as in the URL); leave it out or give {u}", field("number")),
                    )
                    .with("field", field("number")))
                }
                (Some(n), _) => Some(n),
                (None, _) => {
                    return Err(ApiError::new(
                        "invalid",
                        format!("`{}`: a rule number (1 to 65535) is expected, found {v}", field("number")),
                    )
                    .with("field", field("number")))
                }
            }
        }
    };
    let mut words = vec!["add".to_string()];
    words.extend(url.or(number).map(|n| n.to_string()));
    match m.get("set") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let set = v.as_u64().filter(|s| *s <= 31).ok_or_else(|| {
                ApiError::new(
                    "invalid",
                    format!(
                        "`{}`: a set number (0 to 31) is expected, found {v}",
                        field("set")
                    ),
                )
                .with("field", field("set"))
            })?;
            words.extend(["set".to_string(), set.to_string()]);
        }
    }
    words.extend(rule.split_whitespace().map(String::from));
    Ok(words)
}

/// The `add` lines for rule `n` (`url`) or a new rule: one rule as above,
/// or the document GET /v1/rules/N gives (`{"rules": [...], "now_ns": ...,
/// "states": [...]}`, whose rules must all be numbered `n`).
fn rule_words(body: &Value, url: Option<u16>) -> Result<Vec<Vec<String>>, ApiError> {
    let map = body.as_object().ok_or_else(|| {
        ApiError::new(
            "syntax",
            "the body must be a JSON object: {\"rule\": \"pipe 1 ip from any to any\"}, or the rule as GET gives it",
        )
    })?;
    if map.contains_key("rules") {
        return ruleset_lines(map, url);
    }
    rule_entry(map, url, "").map(|w| vec![w])
}

/// `{"rules": [...]}`: each a rule object as GET gives it (the default
/// rule skipped) or a string `"100 pipe 1 ip from any to any"`; `now_ns`
/// and `states`, which GET adds, are ignored.
fn ruleset_lines(map: &Map<String, Value>, url: Option<u16>) -> Result<Vec<Vec<String>>, ApiError> {
    if let Some(extra) = map
        .keys()
        .find(|k| !["rules", "now_ns", "states"].contains(&k.as_str()))
    {
        return Err(ApiError::new(
            "unknown_field",
            format!("unknown field `{extra}`: a ruleset is given as {{\"rules\": [...]}}"),
        )
        .with("field", extra.as_str()));
    }
    let list = map.get("rules").and_then(Value::as_array).ok_or_else(|| {
        ApiError::new("invalid", "`rules` is a list: [\"100 pipe 1 ip from any to any\"], or the rules as GET gives them")
            .with("field", "rules")
    })?;
    let mut lines = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let at = format!("rules[{i}]");
        match r {
            Value::String(s) if url.is_none() => {
                let mut w = vec!["add".to_string()];
                w.extend(s.split_whitespace().map(String::from));
                lines.push(w);
            }
            Value::Object(m) if m.get("default").and_then(Value::as_bool) == Some(true) => {}
            Value::Object(m) => {
                lines.push(rule_entry(m, url, &at).map_err(|e| e.with("index", i))?)
            }
            _ => {
                return Err(ApiError::new(
                    "invalid",
                    format!(
                        "`{at}` is not a rule: a rule object as GET gives it{}",
                        if url.is_none() {
                            ", or a string \"100 pipe 1 ip from any to any\""
                        } else {
                            ""
                        }
                    ),
                )
                .with("index", i))
            }
        }
    }
    Ok(lines)
}

pub(super) async fn add_rule(State(app): State<App>, JsonBody(body): JsonBody) -> ApiResult {
    add_lines(app, rule_words(&body, None)?).await
}

/// Adds the rules (one `add` at once, more all or nothing): 201.
async fn add_lines(app: App, mut lines: Vec<Vec<String>>) -> ApiResult {
    if lines.len() == 1 {
        let words = lines.remove(0);
        let done = blocking(move || app.apply(&words)).await??;
        return Ok((StatusCode::CREATED, applied_json(vec![done])).into_response());
    }
    let lines: Vec<String> = lines.iter().map(|w| w.join(" ")).collect();
    let done = blocking(move || apply_batch(&app, &lines)).await??;
    Ok((StatusCode::CREATED, done).into_response())
}

pub(super) async fn add_rule_at(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let n = rule_number(&n)?;
    add_lines(app, rule_words(&body, Some(n))?).await
}

pub(super) async fn delete_rule(State(app): State<App>, UrlPath(n): UrlPath<String>) -> ApiResult {
    let n = rule_number(&n)?;
    let done = blocking(move || {
        let (snap, _) = app.snapshot()?;
        if n == dummynet_engine::config::DEFAULT_RULE || !snap.rules.iter().any(|r| r.number == n) {
            return Err(ApiError::new(
                "not_found",
                format!("there is no rule {n} to delete"),
            ));
        }
        app.apply(&["delete".into(), n.to_string()])
    })
    .await??;
    Ok(applied_json(vec![done]))
}

/// `PUT /v1/rules/N {"rule": "..."}` (or the document GET gives): rule N
/// becomes these, in one step (the rules numbered N deleted and the new
/// ones added, all or nothing); made if there was none.
pub(super) async fn replace_rule(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let n = rule_number(&n)?;
    let adds = rule_words(&body, Some(n))?;
    blocking(move || replace_rule_with(&app, n, &adds)).await?
}

fn replace_rule_with(app: &App, n: u16, adds: &[Vec<String>]) -> ApiResult {
    let (snap, _) = app.snapshot()?;
    let mut lines = Vec::new();
    if snap.rules.iter().any(|r| r.number == n) {
        lines.push(format!("delete {n}"));
    }
    lines.extend(adds.iter().map(|w| w.join(" ")));
    apply_batch(app, &lines)
}

/// `PATCH /v1/rules/N`: a JSON Merge Patch (RFC 7396) of the document GET
/// gives, then as PUT. A merge patch replaces a list whole, so the rules
/// are given whole (`{"rules": [{"rule": "...", "set": 3}]}`); a rule's
/// own fields may be given alone too (`{"set": 3}` on a number with one
/// rule).
pub(super) async fn patch_rule(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    JsonBody(patch): JsonBody,
) -> ApiResult {
    let n = rule_number(&n)?;
    blocking(move || {
        let (snap, _) = app.snapshot()?;
        let current = serde_json::to_value(rules_json(&snap, &[n])).unwrap_or(Value::Null);
        let rules = current["rules"].as_array().cloned().unwrap_or_default();
        if rules.is_empty() {
            return Err(ApiError::new("not_found", format!("there is no rule {n}")));
        }
        let merged = if patch.get("rules").is_some() || rules.len() > 1 {
            let mut doc = current.clone();
            super::shape::merge_patch(&mut doc, &patch);
            doc
        } else {
            let mut one = rules[0].clone();
            super::shape::merge_patch(&mut one, &patch);
            one
        };
        let adds = rule_words(&merged, Some(n))?;
        replace_rule_with(&app, n, &adds)
    })
    .await?
}

/// `PUT /v1/rules {"rules": ["100 pipe 1 ip from any to any", ...]}` (or
/// the rules as GET gives them): the whole ruleset (but the default rule)
/// replaced by these, in one step: `flush` and each `add`, all or nothing.
pub(super) async fn replace_rules(State(app): State<App>, JsonBody(body): JsonBody) -> ApiResult {
    let map = body.as_object().ok_or_else(|| {
        ApiError::new(
            "syntax",
            "the body must be a JSON object: {\"rules\": [\"100 pipe 1 ip from any to any\"]}",
        )
    })?;
    let adds = ruleset_lines(map, None)?;
    let lines: Vec<String> = std::iter::once("-f flush".to_string())
        .chain(adds.iter().map(|w| w.join(" ")))
        .collect();
    // An error's `index` names the rule in the body, not the batch's line
    // (the `flush` is line 0).
    blocking(move || apply_batch(&app, &lines))
        .await?
        .map_err(|mut e| {
            if let Some(i) = e.extra.get("index").and_then(Value::as_u64) {
                e.extra.insert("index".into(), json!(i.saturating_sub(1)));
            }
            e
        })
}

pub(super) async fn flush_rules(State(app): State<App>) -> ApiResult {
    let done = blocking(move || app.apply(&["-f".into(), "flush".into()])).await??;
    Ok(applied_json(vec![done]))
}
