//! `/v1/rules` and `/v1/rules/N`: the rules as `ipfw --json -d show`
//! gives them; POST adds, PUT replaces one rule or the whole ruleset in
//! one step, DELETE removes.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use super::commands::{apply_batch, string_list};
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
fn rules_json(snap: &dummynet_engine::Snapshot, numbers: &[u16]) -> super::super::views::RulesJson {
    let mut view = super::super::views::rules(snap, numbers, true);
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

/// `{"rule": "pipe 1 ip from any to any"}`: what follows `add N`.
fn rule_words(body: &Value, number: Option<u16>) -> Result<Vec<String>, ApiError> {
    let map = body.as_object().ok_or_else(|| {
        ApiError::new(
            "syntax",
            "the body must be a JSON object: {\"rule\": \"pipe 1 ip from any to any\"}",
        )
    })?;
    if let Some(extra) = map.keys().find(|k| k.as_str() != "rule") {
        return Err(ApiError::new(
            "unknown_field",
            format!("unknown field `{extra}`: a rule is given as {{\"rule\": \"ACTION BODY\"}}"),
        )
        .with("field", extra.as_str()));
    }
    let rule = map.get("rule").and_then(Value::as_str).ok_or_else(|| {
        ApiError::new(
            "invalid",
            "`rule` is required: a string such as \"pipe 1 ip from any to any\"",
        )
        .with("field", "rule")
    })?;
    let mut words = vec!["add".to_string()];
    words.extend(number.map(|n| n.to_string()));
    words.extend(rule.split_whitespace().map(String::from));
    Ok(words)
}

pub(super) async fn add_rule(
    State(app): State<App>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let words = rule_words(&body, None)?;
    let done = blocking(move || app.apply(&words)).await??;
    Ok((StatusCode::CREATED, applied_json(vec![done])).into_response())
}

pub(super) async fn add_rule_at(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let n = rule_number(&n)?;
    let Json(body) = body?;
    let words = rule_words(&body, Some(n))?;
    let done = blocking(move || app.apply(&words)).await??;
    Ok((StatusCode::CREATED, applied_json(vec![done])).into_response())
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

/// `PUT /v1/rules/N {"rule": "..."}`: rule N becomes this one rule, in
/// one step (the rules numbered N deleted and the new one added, all or
/// nothing); made if there was none.
pub(super) async fn replace_rule(
    State(app): State<App>,
    UrlPath(n): UrlPath<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let n = rule_number(&n)?;
    let Json(body) = body?;
    let add = rule_words(&body, Some(n))?.join(" ");
    blocking(move || {
        let (snap, _) = app.snapshot()?;
        let mut lines = Vec::new();
        if snap.rules.iter().any(|r| r.number == n) {
            lines.push(format!("delete {n}"));
        }
        lines.push(add);
        apply_batch(&app, &lines)
    })
    .await?
}

/// `PUT /v1/rules {"rules": ["100 pipe 1 ip from any to any", ...]}`: the
/// whole ruleset (but the default rule) replaced by these, in one step:
/// `flush` and each `add`, all or nothing.
pub(super) async fn replace_rules(
    State(app): State<App>,
    body: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let rules = string_list(&body, "rules", "100 pipe 1 ip from any to any")?;
    let lines: Vec<String> = std::iter::once("-f flush".to_string())
        .chain(rules.iter().map(|rule| format!("add {rule}")))
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
