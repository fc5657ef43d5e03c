//! The one place that knows both shapes of a pipe's, queue's or
//! scheduler's body: the JSON view GET gives (`{"link": {"delay_ns":
//! 20000000}}`, see `views.rs`) and the command language's options
//! (`{"delay": "20ms"}`). Each view field is mapped here to the command
//! words that set it; the others are read-only (counters, flows, what the
//! engine derives) and ignored, except `number`, which must be the URL's.
//! A PUT gives every field it has (`config`); a PATCH is a JSON Merge Patch
//! (RFC 7396) of the GET document, and gives the fields the merge changed
//! (`modify`), so what it leaves out stays as it is.

use serde_json::{Map, Value};

use super::kind::ObjKind;
use super::ApiError;

/// How a view field becomes command words.
#[derive(Clone, Copy)]
enum To {
    /// Shown, not set: ignored in a body.
    ReadOnly,
    /// The object's number: must be the URL's.
    Number,
    /// `WORD N` followed by a unit (`delay 20000000ns`).
    Int(&'static str, &'static str),
    /// `bw N bit/s`, unless a profile or a trace drives the rate.
    Bandwidth,
    /// `plr X`.
    Fraction(&'static str),
    /// `buckets N`: shown as 1 without a mask (one queue), so given only
    /// with a mask, or when a PATCH changes it.
    Buckets,
    /// Options as the language writes them, one string each (`"jitter
    /// 5ms"`); one dropped by a PATCH is turned `off`.
    Impairments,
    /// `mask src-ip ... flow-id ...`.
    Mask,
    /// `queue N` or `queue NB`, from `limit_packets` and `limit_bytes`.
    Limit,
    /// Read with [`To::Limit`].
    LimitBytes,
    /// `type NAME`, with `params` after it.
    SchedType,
    /// Read with [`To::SchedType`].
    Params,
    /// `profile FILE`: a file, which HTTP cannot give.
    Profile,
    /// `trace FILE`: likewise.
    Trace,
    /// The AQM: `droptail`, or its options in the language (`codel target
    /// 5ms`); the text `show` prints cannot be read back.
    Aqm,
    /// A nested object of fields.
    Object(&'static [Field]),
}

/// A view field: its name and how it is set.
struct Field {
    name: &'static str,
    to: To,
}

const fn f(name: &'static str, to: To) -> Field {
    Field { name, to }
}

const LINK: &[Field] = &[
    f("bandwidth_bps", To::Bandwidth),
    f("delay_ns", To::Int("delay", "ns")),
    f("burst_bytes", To::Int("burst", "")),
    f("profile", To::Profile),
    f("trace", To::Trace),
    f("impairments", To::Impairments),
];

/// A queue's fields but its number and scheduler; `sched` and `number`
/// are settable on a queue, read-only on a pipe's own queue.
macro_rules! flowset {
    ($number:expr, $sched:expr) => {
        &[
            f("number", $number),
            f("sched", $sched),
            f("linked", To::ReadOnly),
            f("weight", To::Int("weight", "")),
            f("lmax_bytes", To::Int("lmax", "")),
            f("pri", To::Int("pri", "")),
            f("limit_packets", To::Limit),
            f("limit_bytes", To::LimitBytes),
            f("plr", To::Fraction("plr")),
            f("buckets", To::Buckets),
            f("mask", To::Mask),
            f("aqm", To::Aqm),
            f("impairments", To::Impairments),
            f("flows", To::ReadOnly),
        ]
    };
}

const PIPE: &[Field] = &[
    f("number", To::Number),
    f("link", To::Object(LINK)),
    f("queue", To::Object(flowset!(To::ReadOnly, To::ReadOnly))),
    f("sched_type", To::ReadOnly),
    f("waited_packets", To::ReadOnly),
    f("role", To::ReadOnly),
];
const QUEUE: &[Field] = flowset!(To::Number, To::Int("sched", ""));
const SCHED: &[Field] = &[
    f("number", To::Number),
    f("type", To::SchedType),
    f("params", To::Params),
    f("mask", To::Mask),
    f("link", To::Object(LINK)),
    f("instances", To::ReadOnly),
];

fn fields(kind: ObjKind) -> &'static [Field] {
    match kind {
        ObjKind::Pipe => PIPE,
        ObjKind::Queue => QUEUE,
        ObjKind::Sched => SCHED,
    }
}

/// Whether the body's top-level `key` with `value` is a view field (the
/// rest are the command language's options). A name both shapes have is
/// the view's when its value has the view's type: `"queue": {...}` and
/// `"mask": {...}` are views, `"queue": 50` and `"mask": "src-ip /24"`
/// options; the numbers both take (`weight`, `plr`...) mean the same.
pub(super) fn is_view_field(kind: ObjKind, key: &str, value: &Value) -> bool {
    let Some(field) = fields(kind).iter().find(|x| x.name == key) else {
        return false;
    };
    // A keyword of the language parses, or fails further on.
    let shared = match dummynet_lang::parse_command(&format!("{} 1 config {key}", kind_word(kind)))
    {
        Ok(_) => true,
        Err(e) => e.found() != Some(key),
    };
    if !shared {
        return true;
    }
    match field.to {
        To::Object(_) | To::Mask | To::Params | To::Impairments => {
            value.is_object() || value.is_array() || value.is_null()
        }
        // `"type": "fq_codel"` and `"type": "FQ_CODEL"` say the same.
        To::SchedType => true,
        _ => value.is_number() || value.is_null(),
    }
}

fn kind_word(kind: ObjKind) -> &'static str {
    match kind {
        ObjKind::Pipe => "pipe",
        ObjKind::Queue => "queue",
        ObjKind::Sched => "sched",
    }
}

/// RFC 7396: `patch` merged into `target` (a null removes a member).
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The command words (after `KIND N config|modify`) that make the object
/// numbered `n` what the view fields of `view` say. `base`: the object as
/// it is, for a PATCH (`view` is then the merged document and only what
/// differs is given); `None` for a PUT.
pub(super) fn view_words(
    kind: ObjKind,
    n: u32,
    view: &Map<String, Value>,
    base: Option<&Map<String, Value>>,
) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    walk(fields(kind), "", n, view, base, &mut out)?;
    Ok(out)
}

fn get<'a>(m: Option<&'a Map<String, Value>>, k: &str) -> Option<&'a Value> {
    m.and_then(|m| m.get(k)).filter(|v| !v.is_null())
}

fn walk(
    spec: &'static [Field],
    path: &str,
    n: u32,
    view: &Map<String, Value>,
    base: Option<&Map<String, Value>>,
    out: &mut Vec<String>,
) -> Result<(), ApiError> {
    unknown_field(spec, path, view)?;
    let patch = base.is_some();
    for field in spec {
        let name = field.name;
        let at = format!("{path}{name}");
        let now = get(Some(view), name);
        let was = get(base, name);
        if patch && now == was && !matches!(field.to, To::Limit | To::SchedType) {
            continue;
        }
        let bad = |what: &str| {
            ApiError::new("invalid", format!("field `{at}`: {what}")).with("field", at.as_str())
        };
        match field.to {
            To::ReadOnly | To::LimitBytes | To::Params => {}
            To::Number => {
                if let Some(v) = now {
                    if v.as_u64() != Some(u64::from(n)) {
                        return Err(bad(&format!(
                            "{v} is not this object's number ({n}, as in the URL); \
                             the number is read-only: leave it out or give {n}"
                        )));
                    }
                }
            }
            To::Int(word, unit) => {
                if let Some(v) = now {
                    let x = v.as_u64().ok_or_else(|| {
                        bad(&format!(
                            "a whole number is expected{}, found {v}; in the command \
                             language's syntax, give `{word}` at the top level instead",
                            if unit.is_empty() {
                                String::new()
                            } else {
                                format!(" (in {unit})")
                            }
                        ))
                    })?;
                    out.extend([word.to_string(), format!("{x}{unit}")]);
                }
            }
            To::Bandwidth => {
                let driven = get(Some(view), "profile").is_some()
                    || get(Some(view), "trace").and_then(Value::as_bool) == Some(true);
                if let (Some(v), false) = (now, driven) {
                    let x = v.as_u64().ok_or_else(|| {
                        bad(&format!(
                            "a whole number of bit/s is expected, found {v}; in the command \
                             language's syntax, give `bw` at the top level (\"bw\": \"10Mbit/s\")"
                        ))
                    })?;
                    out.extend(["bw".to_string(), format!("{x}bit/s")]);
                }
            }
            To::Buckets => {
                let masked = get(Some(view), "mask")
                    .and_then(Value::as_object)
                    .is_some_and(|m| m.values().any(|x| !is_zero(x)));
                if let (Some(v), true) = (now, masked || patch) {
                    let x = v
                        .as_u64()
                        .ok_or_else(|| bad(&format!("a whole number is expected, found {v}")))?;
                    out.extend(["buckets".to_string(), x.to_string()]);
                }
            }
            To::Fraction(word) => {
                if let Some(v) = now {
                    let x = v
                        .as_f64()
                        .ok_or_else(|| bad(&format!("a number in 0..1 is expected, found {v}")))?;
                    out.extend([word.to_string(), format!("{x}")]);
                }
            }
            To::Impairments => out.extend(impairment_words(now, was, &bad)?),
            To::Mask => {
                let Some(v) = now else {
                    if was.is_some() {
                        out.extend(mask_words(&Map::new(), &bad)?);
                    }
                    continue;
                };
                let m = v
                    .as_object()
                    .ok_or_else(|| bad("an object of mask fields is expected, e.g. {\"src_ip\": \"255.255.255.0\"}"))?;
                let words = mask_words(m, &bad)?;
                if patch || m.values().any(|x| !is_zero(x)) {
                    out.extend(words);
                }
            }
            To::Limit => {
                let bytes = get(Some(view), "limit_bytes");
                if patch && now == was && bytes == get(base, "limit_bytes") {
                    continue;
                }
                out.extend(limit_words(now, bytes, &bad)?);
            }
            To::SchedType => {
                let params = get(Some(view), "params");
                if patch && now == was && params == get(base, "params") {
                    continue;
                }
                out.extend(sched_words(now, params, &bad)?);
            }
            To::Profile => {
                if now.is_some() {
                    return Err(from_file(&at, "profile", patch));
                }
                if patch {
                    out.extend(["profile".to_string(), "off".to_string()]);
                }
            }
            To::Trace => match now {
                Some(Value::Bool(true)) => return Err(from_file(&at, "trace", patch)),
                None | Some(Value::Bool(false)) => {
                    if patch {
                        out.extend(["trace".to_string(), "off".to_string()]);
                    }
                }
                Some(_) => return Err(bad("true or false is expected")),
            },
            To::Aqm => {
                if let Some(v) = now {
                    out.extend(aqm_words(v, &at, &bad)?);
                }
            }
            To::Object(sub) => {
                let Some(v) = now else { continue };
                let m = v
                    .as_object()
                    .ok_or_else(|| bad(&format!("an object is expected, found {v}")))?;
                let b = was.and_then(Value::as_object);
                let base = if patch {
                    Some(b.unwrap_or(&EMPTY))
                } else {
                    None
                };
                walk(sub, &format!("{at}."), n, m, base, out)?;
            }
        }
    }
    Ok(())
}

/// The queue's limit as words: in packets or in bytes, not both.
fn limit_words(
    packets: Option<&Value>,
    bytes: Option<&Value>,
    bad: &dyn Fn(&str) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    match (packets, bytes) {
        (Some(_), Some(_)) => Err(bad(
            "give one of `limit_packets` and `limit_bytes`, the other null",
        )),
        (Some(p), None) => {
            let p = p
                .as_u64()
                .ok_or_else(|| bad("a whole number of packets is expected"))?;
            Ok(vec!["queue".to_string(), p.to_string()])
        }
        (None, Some(b)) => {
            let b = b
                .as_u64()
                .ok_or_else(|| bad("a whole number of bytes is expected"))?;
            Ok(vec!["queue".to_string(), format!("{b}B")])
        }
        (None, None) => Ok(Vec::new()),
    }
}

/// Refuses a key `spec` does not have, naming the ones it has (and the
/// nearest, if one is near).
fn unknown_field(spec: &[Field], path: &str, view: &Map<String, Value>) -> Result<(), ApiError> {
    if let Some(bad) = view.keys().find(|k| !spec.iter().any(|x| x.name == *k)) {
        let names: Vec<&'static str> = spec.iter().map(|x| x.name).collect();
        let mut e = ApiError::new(
            "unknown_field",
            format!(
                "unknown field `{path}{bad}`: {} has {}",
                if path.is_empty() {
                    "the object"
                } else {
                    path.trim_end_matches('.')
                },
                names.join(", ")
            ),
        )
        .with("field", format!("{path}{bad}"));
        if let Some(s) = dummynet_lang::suggest(bad, &names) {
            e.message.push_str(&format!("; did you mean `{path}{s}`?"));
            e = e.with("suggestion", format!("{path}{s}"));
        }
        return Err(e);
    }
    Ok(())
}

/// An AQM as the command language writes it, as words; `show`'s form is
/// refused, since it cannot be read back.
fn aqm_words(v: &Value, at: &str, bad: &dyn Fn(&str) -> ApiError) -> Result<Vec<String>, ApiError> {
    let s = v.as_str().ok_or_else(|| {
        bad("a string is expected: `droptail` or an AQM in the command language (\"codel target 5ms\")")
    })?;
    if s.starts_with("AQM") || s.starts_with(char::is_whitespace) {
        return Err(ApiError::new(
            "conflict",
            format!(
                "field `{at}`: `{}` is the AQM as `show` prints it, which cannot be \
                 read back; give it in the command language (\"codel target 5ms\", \
                 \"red 0.002/30/80/0.1\"), or change the other fields with PATCH, \
                 which keeps it",
                s.trim()
            ),
        )
        .with("field", at));
    }
    Ok(s.split_whitespace().map(String::from).collect())
}

/// The `impairments` list as words: each item as written, and `off` for
/// each kind the base had and the list no longer has.
fn impairment_words(
    now: Option<&Value>,
    was: Option<&Value>,
    bad: &dyn Fn(&str) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    let list = |v: Option<&Value>| -> Result<Vec<String>, ApiError> {
        match v {
            None => Ok(Vec::new()),
            Some(Value::Array(l)) => l
                .iter()
                .map(|x| {
                    x.as_str().map(str::to_string).ok_or_else(|| {
                        bad("a list of options as the language writes them is expected, e.g. [\"jitter 5ms\"]")
                    })
                })
                .collect(),
            Some(_) => Err(bad(
                "a list of options as the language writes them is expected, e.g. [\"jitter 5ms\"]",
            )),
        }
    };
    let now = list(now)?;
    let mut out = Vec::new();
    let first = |s: &String| s.split_whitespace().next().unwrap_or("").to_string();
    let kinds: Vec<String> = now.iter().map(first).collect();
    for gone in list(was)?.iter().map(first) {
        if !kinds.contains(&gone) {
            out.extend([gone, "off".to_string()]);
        }
    }
    for item in &now {
        out.extend(item.split_whitespace().map(String::from));
    }
    Ok(out)
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Number(x) => x.as_u64() == Some(0),
        Value::String(s) => s == "0.0.0.0" || s == "::",
        Value::Null => true,
        _ => false,
    }
}

/// `profile` and `trace` name files the daemon reads, which an HTTP client
/// may not make it read.
fn from_file(at: &str, word: &str, patch: bool) -> ApiError {
    let what = if patch {
        format!("field `{at}`: a {word} is read from a file, which the HTTP API cannot give; set it with the command language (`dummynet ipfw pipe N config {word} FILE`)")
    } else {
        format!("field `{at}`: a {word} is read from a file, which the HTTP API cannot give: PUT would drop it; change the other fields with PATCH, which keeps it, or leave `{at}` out to drop it")
    };
    ApiError::new("conflict", what).with("field", at)
}

/// The view's mask (zero where a field is missing) as `mask` and its
/// eight fields.
fn mask_words(
    m: &Map<String, Value>,
    bad: &dyn Fn(&str) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    const FIELDS: &[(&str, &str, bool)] = &[
        ("src_ip", "src-ip", true),
        ("dst_ip", "dst-ip", true),
        ("src_ip6", "src-ip6", true),
        ("dst_ip6", "dst-ip6", true),
        ("src_port", "src-port", false),
        ("dst_port", "dst-port", false),
        ("proto", "proto", false),
        ("flow_id", "flow-id", false),
    ];
    if let Some(k) = m.keys().find(|k| !FIELDS.iter().any(|(n, _, _)| n == k)) {
        let names: Vec<&'static str> = FIELDS.iter().map(|x| x.0).collect();
        return Err(bad(&format!(
            "unknown mask field `{k}` (a mask has {})",
            names.join(", ")
        )));
    }
    let mut out = vec!["mask".to_string()];
    for (name, word, addr) in FIELDS {
        let value = match (m.get(*name), addr) {
            (None | Some(Value::Null), true) => {
                if word.ends_with('6') { "::" } else { "0.0.0.0" }.to_string()
            }
            (None | Some(Value::Null), false) => "0".to_string(),
            (Some(Value::String(s)), true) => s.clone(),
            (Some(Value::Number(x)), false) if x.is_u64() => x.to_string(),
            (Some(v), _) => {
                return Err(bad(&format!(
                    "mask field `{name}`: {} expected, found {v}",
                    if *addr {
                        "an address string"
                    } else {
                        "a whole number"
                    }
                )))
            }
        };
        out.extend([word.to_string(), value]);
    }
    Ok(out)
}

/// `type NAME` and the type's parameters, each written in its unit.
fn sched_words(
    ty: Option<&Value>,
    params: Option<&Value>,
    bad: &dyn Fn(&str) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    let Some(ty) = ty else {
        if params.is_some_and(|p| p.as_object().is_some_and(|m| !m.is_empty())) {
            return Err(bad("`params` needs the `type` they belong to"));
        }
        return Ok(Vec::new());
    };
    let name = ty
        .as_str()
        .ok_or_else(|| bad("a scheduler type's name is expected"))?;
    let sched = dummynet_engine::sched::lookup(name).ok_or_else(|| {
        bad(&format!(
            "`{name}` is not a scheduler type (types: {})",
            dummynet_engine::sched::names().join(", ")
        ))
    })?;
    let mut out = vec!["type".to_string(), sched.name.to_string()];
    let empty = Map::new();
    let params = match params {
        None => &empty,
        Some(p) => p
            .as_object()
            .ok_or_else(|| bad("`params` is an object of the type's parameters"))?,
    };
    use dummynet_engine::params::ParamKind;
    for (k, v) in params {
        let spec = sched.params.iter().find(|p| p.name == k).ok_or_else(|| {
            let names: Vec<&str> = sched.params.iter().map(|p| p.name).collect();
            bad(&format!(
                "`{k}` is not a parameter of `{}` ({})",
                sched.name,
                if names.is_empty() {
                    "it takes none".to_string()
                } else {
                    names.join(", ")
                }
            ))
        })?;
        let x = v.as_u64().ok_or_else(|| {
            bad(&format!(
                "parameter `{k}`: a whole number is expected, found {v}"
            ))
        })?;
        match spec.kind {
            ParamKind::Count | ParamKind::Size => out.extend([k.clone(), x.to_string()]),
            ParamKind::Time => out.extend([k.clone(), format!("{x}ns")]),
            ParamKind::Fraction { .. } => {
                out.extend([k.clone(), dummynet_engine::params::from_ppb(x).to_string()])
            }
            ParamKind::Flag { off } => out.push(if x == 0 { off.to_string() } else { k.clone() }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(kind: ObjKind, view: Value, base: Option<Value>) -> Result<String, ApiError> {
        let v = view.as_object().cloned().unwrap_or_default();
        let b = base.as_ref().and_then(Value::as_object);
        view_words(kind, 1, &v, b).map(|w| w.join(" "))
    }

    #[test]
    fn a_pipe_view_becomes_its_options() {
        let pipe = json!({"number": 1, "sched_type": "WF2Q+", "waited_packets": 7,
            "link": {"bandwidth_bps": 1000000, "delay_ns": 20000000, "burst_bytes": 0,
                     "profile": null, "trace": false, "impairments": ["jitter 5ms"]},
            "queue": {"number": 131073, "sched": 65537, "linked": true, "weight": 1,
                      "lmax_bytes": 0, "pri": 0, "limit_packets": null, "limit_bytes": 102400,
                      "plr": 0.01, "buckets": 64, "aqm": "droptail", "impairments": [],
                      "mask": {"src_ip": "255.255.255.0", "dst_ip": "0.0.0.0"}, "flows": []}});
        let w = words(ObjKind::Pipe, pipe.clone(), None).unwrap();
        assert_eq!(
            w,
            "bw 1000000bit/s delay 20000000ns burst 0 jitter 5ms weight 1 lmax 0 pri 0 \
             queue 102400B plr 0.01 buckets 64 mask src-ip 255.255.255.0 dst-ip 0.0.0.0 \
             src-ip6 :: dst-ip6 :: src-port 0 dst-port 0 proto 0 flow-id 0 droptail"
        );
        let mut all = vec!["pipe".to_string(), "1".into(), "config".into()];
        all.extend(w.split(' ').map(String::from));
        assert!(dummynet_lang::parse_args(&all).is_ok(), "{all:?}");

        // A merge patch gives only what it changes; an impairment dropped is off.
        let mut merged = pipe.clone();
        merge_patch(
            &mut merged,
            &json!({"link": {"delay_ns": 50000000, "impairments": []}}),
        );
        assert_eq!(
            words(ObjKind::Pipe, merged, Some(pipe.clone())).unwrap(),
            "delay 50000000ns jitter off"
        );
        // A number that is not the URL's is refused; other read-only fields are ignored.
        let e = words(ObjKind::Pipe, json!({"number": 2}), None).unwrap_err();
        assert_eq!(
            (e.kind, e.extra["field"].as_str()),
            ("invalid", Some("number"))
        );
        assert_eq!(
            words(ObjKind::Pipe, json!({"sched_type": "FIFO"}), None).unwrap(),
            ""
        );
        // A profile cannot come over HTTP.
        let e = words(ObjKind::Pipe, json!({"link": {"profile": "lte"}}), None).unwrap_err();
        assert_eq!(e.kind, "conflict");
    }

    #[test]
    fn unknown_view_fields_get_the_name_of_either_shape() {
        let e = words(ObjKind::Pipe, json!({"link": {"delay": 5}}), None).unwrap_err();
        assert_eq!(e.kind, "unknown_field");
        assert_eq!(e.extra["field"], "link.delay");
        assert_eq!(e.extra["suggestion"], "link.delay_ns");
        let e = words(ObjKind::Pipe, json!({"link": {"bandwidth": 5}}), None).unwrap_err();
        assert_eq!(e.extra["suggestion"], "link.bandwidth_bps");
    }

    #[test]
    fn a_sched_view_writes_its_parameters_in_their_units() {
        let view = json!({"number": 1, "type": "FQ_CODEL", "instances": [],
            "params": {"flows": 1024, "interval": 100000000, "quantum": 1000, "target": 7000000},
            "mask": {"dst_ip": "0.0.0.0"}, "link": null});
        let w = words(ObjKind::Sched, view, None).unwrap();
        assert_eq!(
            w,
            "type fq_codel flows 1024 interval 100000000ns quantum 1000 target 7000000ns"
        );
        let mut all = vec!["sched".to_string(), "1".into(), "config".into()];
        all.extend(w.split(' ').map(String::from));
        assert!(dummynet_lang::parse_args(&all).is_ok(), "{all:?}");
    }

    #[test]
    fn which_keys_are_the_views() {
        assert!(is_view_field(ObjKind::Pipe, "link", &json!({})));
        assert!(is_view_field(ObjKind::Pipe, "queue", &json!({})));
        assert!(!is_view_field(ObjKind::Pipe, "queue", &json!(50)));
        assert!(!is_view_field(ObjKind::Pipe, "bw", &json!("1Mbit/s")));
        assert!(!is_view_field(ObjKind::Queue, "mask", &json!("src-ip /24")));
        assert!(is_view_field(
            ObjKind::Queue,
            "mask",
            &json!({"src_ip": "/24"})
        ));
        assert!(is_view_field(ObjKind::Queue, "limit_packets", &json!(50)));
        assert!(is_view_field(ObjKind::Sched, "type", &json!("FQ_CODEL")));
    }
}
