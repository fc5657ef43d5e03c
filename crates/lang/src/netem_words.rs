//! netem's words in a pipe's options, for users who come from `tc netem`:
//! `rate R` (tc's units: `mbit` is megabit/s, `mbps` megabyte/s, a bare
//! number bit/s) and `limit N` (packets, as `queue N`) are taken; a unit
//! written apart (`delay 100 ms`), ipfw's `bw 5mbps` (bits, not tc's
//! bytes) and netem's near-misses (`dup`) are explained.

use crate::error::ParseError;
use crate::lexer::{Cursor, Token};
use crate::units::{queue_limit, ValueError};
use dummynet_engine::config::QueueLimit;

/// `rate R` as tc reads it, in bit/s.
pub(crate) fn rate(s: &str) -> Result<u64, ValueError> {
    crate::tc::units::rate_bps(s).ok_or_else(|| {
        ValueError::Malformed(format!(
            "expected a rate as tc writes it, such as 10mbit, 500kbit or 1gbit \
             (bit, kbit, mbit, gbit; bps, kbps, mbps are bytes per second; a bare number is bit/s), \
             found `{s}`"
        ))
    })
}

/// `limit N`: netem's queue in packets.
pub(crate) fn limit(s: &str) -> Result<QueueLimit, ValueError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::Malformed(format!(
            "expected a number of packets such as 1000 (netem's limit; `queue` also takes bytes), found `{s}`"
        )));
    }
    queue_limit(s)
}

/// Time units as netem's users write them, apart from the number.
const TIME_UNITS: &[&str] = &[
    "s", "sec", "secs", "ms", "msec", "msecs", "us", "usec", "usecs", "ns", "nsec", "nsecs",
];

/// After `delay N`: a unit written as a word of its own (`delay 100 ms`)
/// is refused, saying how to write it.
pub(crate) fn unit_apart(cur: &Cursor<'_>, number: Option<Token<'_>>) -> Result<(), ParseError> {
    let (Some(n), Some(u)) = (number, cur.peek()) else {
        return Ok(());
    };
    let unit = u.text.to_ascii_lowercase();
    if TIME_UNITS.contains(&unit.as_str())
        && n.text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return Err(cur.error_at(
            u,
            crate::ErrorKind::Syntax,
            format!("write the unit without a space: `{}{}`", n.text, u.text),
        ));
    }
    Ok(())
}

/// ipfw's `bw 5mbps` is 5 Mbit/s; in tc, `mbps` is megabytes per second.
pub(crate) fn byte_rate_note(given: &str) -> Option<String> {
    let lower = given.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '/');
    let unit = &lower[digits.len()..];
    if !["bps", "kbps", "mbps", "gbps", "tbps"].contains(&unit) || digits.is_empty() {
        return None;
    }
    let bits = format!("{}{}it/s", digits, &unit[..unit.len() - 2]);
    Some(format!(
        "`bw {given}` is {bits} (ipfw reads `bps` as bits per second); \
         in tc, `{unit}` is bytes per second: for that, write `rate {given}` or `bw {digits}{}Byte/s`",
        match &unit[..unit.len() - 3] {
            "k" => "K",
            "m" => "M",
            "g" => "G",
            "t" => "T",
            _ => "",
        }
    ))
}

/// netem's near-misses and what they mean.
pub(crate) fn near_miss(word: &str) -> Option<&'static str> {
    match word.to_ascii_lowercase().as_str() {
        "dup" | "dupe" | "dupl" | "dupes" | "duplicates" => Some("duplicate"),
        "corruption" => Some("corrupt"),
        "latency" => Some("delay"),
        _ => None,
    }
}
