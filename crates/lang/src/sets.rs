//! `set show|enable|disable|move|swap`, and `set N flush|delete`: ipfw's
//! rule sets, numbered 0..31 (31 holds the default rule).

use dummynet_engine::config::{Command, SetCmd};

use crate::error::ParseError;
use crate::lexer::Cursor;
use crate::{ShowRequest, Statement};

const VERBS: &[&str] = &["show", "enable", "disable", "move", "swap"];

pub(crate) fn parse(cur: &mut Cursor<'_>) -> Result<Statement, ParseError> {
    if cur.peek_is_number() {
        // `set N flush` / `set N delete`: every rule of the set.
        let n = cur.number("rule set", 0, 31)? as u8;
        let v = cur.word("`flush` or `delete` after `set N`")?;
        if v.is("flush") || v.is("delete") {
            return Ok(Statement::Apply(Command::DeleteSet(n)));
        }
        return Err(cur.expected_at(v, "`flush` or `delete` after `set N`", &["flush", "delete"]));
    }
    let v = cur.word("what to do with rule sets (show, enable, disable, move, swap)")?;
    let cmd = match v.text.to_ascii_lowercase().as_str() {
        "show" | "list" => return Ok(Statement::Show(ShowRequest::Sets)),
        "enable" | "disable" => {
            let (mut enable, mut disable) = (0u32, 0u32);
            let mut on = v.is("enable");
            loop {
                while cur.peek_is_number() {
                    let n = cur.number("rule set", 0, 31)?;
                    if on {
                        enable |= 1 << n;
                    } else {
                        disable |= 1 << n;
                    }
                }
                if cur.eat("enable") {
                    on = true;
                } else if cur.eat("disable") {
                    on = false;
                } else {
                    break;
                }
            }
            if enable | disable == 0 {
                return Err(cur.expected("the numbers of the sets (0..30)", &[]));
            }
            SetCmd::Toggle { enable, disable }
        }
        "move" => {
            if cur.eat("rule") {
                let number = cur.number("rule number", 1, 65534)? as u16;
                if !cur.eat("to") {
                    return Err(cur.expected("`to` and the set", &["to"]));
                }
                let to = cur.number("rule set", 0, 31)? as u8;
                SetCmd::MoveRule { number, to }
            } else {
                let from = cur.number("rule set", 0, 31)? as u8;
                if !cur.eat("to") {
                    return Err(cur.expected("`to` and the set", &["to"]));
                }
                let to = cur.number("rule set", 0, 31)? as u8;
                SetCmd::Move { from, to }
            }
        }
        "swap" => {
            let a = cur.number("rule set", 0, 31)? as u8;
            let b = cur.number("rule set", 0, 31)? as u8;
            SetCmd::Swap(a, b)
        }
        _ => return Err(cur.expected_at(v, "show, enable, disable, move or swap", VERBS)),
    };
    Ok(Statement::Apply(Command::RuleSets(cmd)))
}
