//! `table N create|destroy|add|delete|flush|list`: ipfw's lookup tables.
//!
//! Keys are read by their form: an address or network (`10.0.0.0/8`,
//! `2001:db8::/32`), a number, or else an interface name. A value after a
//! key is a number; it is what `tablearg` hands to `pipe`, `queue`,
//! `skipto` or `call`.

use dummynet_engine::config::{Command, TableCmd, TableKey, TableType};

use crate::error::{ErrorKind, ParseError};
use crate::lexer::Cursor;
use crate::rule::{addr_match, table_name};
use crate::{ShowRequest, Statement};

const VERBS: &[&str] = &[
    "create", "destroy", "add", "delete", "flush", "list", "show", "print", "info",
];

/// What follows `table`.
pub(crate) fn parse(cur: &mut Cursor<'_>) -> Result<Statement, ParseError> {
    let t = cur.word("a table number or name (or `all`) after `table`")?;
    let all = t.is("all");
    let name = if all {
        None
    } else {
        Some(table_name(t.text).map_err(|m| cur.error_at(t, ErrorKind::Syntax, m))?)
    };
    let v = cur.word("what to do with the table (create, add, delete, flush, list, destroy)")?;
    let verb = v.text.to_ascii_lowercase();
    let statement = match (verb.as_str(), name) {
        ("list" | "show" | "print" | "info", name) => Statement::Show(ShowRequest::Tables(name)),
        ("flush", None) => {
            return Err(cur.error_at(
                t,
                ErrorKind::Unavailable,
                "flush tables one at a time: `table N flush`",
            ))
        }
        (_, None) => {
            return Err(cur.error_at(
                t,
                ErrorKind::Syntax,
                format!("`table all` takes `list`, not `{}`", v.text),
            ))
        }
        ("create", Some(name)) => {
            let mut ty = TableType::Addr;
            if cur.eat("type") {
                let w = cur.word("a table type (addr, iface, number) after `type`")?;
                ty = match w.text.to_ascii_lowercase().as_str() {
                    "addr" | "cidr" => TableType::Addr,
                    "iface" => TableType::Iface,
                    "number" => TableType::Number,
                    _ => {
                        return Err(cur.expected_at(
                            w,
                            "a table type dummynet keeps (addr, iface, number)",
                            &["addr", "iface", "number"],
                        ))
                    }
                };
            }
            // `valtype`, `algo`, `limit` and `missing`: ipfw's tuning, which
            // a hash per prefix length does not need.
            while let Some(w) = cur
                .peek()
                .filter(|w| w.is("valtype") || w.is("algo") || w.is("limit"))
            {
                cur.bump();
                cur.word(&format!("a value after `{}`", w.text))?;
            }
            cur.eat("missing");
            Statement::Apply(Command::Table(name, TableCmd::Create(ty)))
        }
        ("destroy", Some(name)) => Statement::Apply(Command::Table(name, TableCmd::Destroy)),
        ("flush", Some(name)) => Statement::Apply(Command::Table(name, TableCmd::Flush)),
        ("add", Some(name)) => {
            let mut entries = Vec::new();
            while !cur.at_end() {
                let key = parse_key(cur)?;
                let value = if matches!(key, TableKey::Number(_)) {
                    // Numbers are keys: a number table's values follow
                    // keys one for one only when written `KEY VALUE`.
                    if entries.is_empty() && cur.peek_is_number() {
                        cur.number("table value", 0, u64::from(u32::MAX))? as u32
                    } else {
                        0
                    }
                } else if cur.peek_is_number() {
                    cur.number("table value", 0, u64::from(u32::MAX))? as u32
                } else {
                    0
                };
                entries.push((key, value));
                if matches!(entries[0].0, TableKey::Number(_)) {
                    break;
                }
            }
            if entries.is_empty() {
                return Err(cur.expected(
                    "an entry to add (an address, network, number or interface)",
                    &[],
                ));
            }
            Statement::Apply(Command::Table(name, TableCmd::Add(entries)))
        }
        ("delete" | "del", Some(name)) => {
            let mut keys = Vec::new();
            while !cur.at_end() {
                keys.push(parse_key(cur)?);
            }
            if keys.is_empty() {
                return Err(cur.expected("an entry to delete", &[]));
            }
            Statement::Apply(Command::Table(name, TableCmd::Delete(keys)))
        }
        _ => return Err(cur.expected_at(v, "create, add, delete, flush, list or destroy", VERBS)),
    };
    Ok(statement)
}

fn parse_key(cur: &mut Cursor<'_>) -> Result<TableKey, ParseError> {
    let t = cur.word("a table entry")?;
    if t.text.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .text
            .parse::<u32>()
            .map(TableKey::Number)
            .map_err(|_| cur.error_at(t, ErrorKind::Range, "a number entry is 0..4294967295"));
    }
    if let Ok(m) = addr_match(t.text) {
        return Ok(TableKey::Addr(m));
    }
    let iface_like = t.text.len() <= 15
        && t.text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && t.text.starts_with(|c: char| c.is_ascii_alphabetic());
    if iface_like {
        return Ok(TableKey::Iface(t.text.to_string()));
    }
    Err(cur.error_at(
        t,
        ErrorKind::Syntax,
        format!(
            "expected an address or network (10.0.0.0/8), a number or an interface name, found `{}`",
            t.text
        ),
    ))
}
