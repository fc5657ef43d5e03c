//! The units and bounds every layer shares: queue limits, the numbers
//! FreeBSD caps objects at, and how `show` writes a time.

use crate::time::{Nanos, NS_PER_SEC};

/// Highest user-visible rule, pipe, queue or scheduler number.
pub const MAX_NUMBER: u32 = 65535;
/// FreeBSD's `DN_MAX_ID`: `pipe N` also creates FIFO scheduler `N + DN_MAX_ID`
/// and flowset `N + 2 * DN_MAX_ID` (the `q131073` of `pipe 1 show`).
pub const DN_MAX_ID: u32 = 65536;
/// The default rule's number.
pub const DEFAULT_RULE: u16 = 65535;

/// Default of `net.inet.ip.dummynet.instance_limit`: 65536 flows, each
/// some hundreds of bytes of queue and instance (`dummynet stats` prints the
/// worst case), tens of MiB at most; far more than the thousands of flows a
/// busy emulated link sees between two expiry sweeps.
pub const DEFAULT_INSTANCE_LIMIT: u32 = 65536;

/// Queue size limit: FreeBSD's `queue N` (slots) or `queue NKbytes` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Slots(u32),
    Bytes(u64),
}

/// FreeBSD: 50 slots by default; at most 100 slots and 1 MiB unless the
/// `pipe_slot_limit` / `pipe_byte_limit` settings raise the bounds.
pub const DEFAULT_QUEUE_SLOTS: u32 = 50;
pub const MAX_QUEUE_SLOTS: u32 = 100;
pub const MAX_QUEUE_BYTES: u64 = 1024 * 1024;
/// FreeBSD's default hash size for masked flowsets.
pub const DEFAULT_BUCKETS: u32 = 64;
pub const MAX_BUCKETS: u32 = 65536;
pub const MAX_WEIGHT: u32 = 100;
/// The widest `lmax` any scheduler takes (RR's 2048); each type narrows it
/// ([`crate::sched::SchedType::lmax`]).
pub const MAX_LMAX: u32 = 2048;
/// `pri` is a C `int` in FreeBSD, unchecked.
pub const MAX_PRI: u32 = i32::MAX as u32;

impl Default for QueueLimit {
    fn default() -> Self {
        QueueLimit::Slots(DEFAULT_QUEUE_SLOTS)
    }
}

/// Largest bandwidth accepted: 10 Tbit/s (credit arithmetic has room for far more).
pub const MAX_BW: u64 = 10_000_000_000_000;
/// Largest delay accepted: one hour (FreeBSD stops at 10 s; a "link to the moon"
/// or a deep-space hop needs more).
pub const MAX_DELAY: Nanos = 3600 * NS_PER_SEC;

/// FreeBSD's `us_to_time` for `show`: microseconds as `0`, `NNus`, `N.Nms`
/// or `N.Ns`, the fractional forms with C's `%g`.
pub fn fmt_time(t: Nanos) -> String {
    let us = t / 1_000;
    if us == 0 {
        "0".to_string()
    } else if us < 1_000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{}ms", fmt_g(us as f64 / 1e3, 6))
    } else {
        format!("{}s", fmt_g(us as f64 / 1e6, 6))
    }
}

/// C's `%.{precision}g`: `precision` significant digits, trailing zeros
/// removed, exponent form below 1e-4 or from 10^precision on.
pub fn fmt_g(v: f64, precision: usize) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".to_string()
        } else {
            format!("{v}")
        };
    }
    let p = precision.max(1);
    // The exponent after rounding to `p` digits decides the form, as in C.
    let sci = format!("{:.*e}", p - 1, v);
    let exp: i32 = sci
        .rsplit_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let (mant, _) = sci.split_once('e').unwrap_or((&sci, ""));
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    #[test]
    fn g_format_matches_c() {
        assert_eq!(fmt_g(5.0, 6), "5");
        assert_eq!(fmt_g(0.125, 6), "0.125");
        assert_eq!(fmt_g(1.25, 6), "1.25");
        assert_eq!(fmt_g(2.5, 6), "2.5");
        assert_eq!(fmt_g(999.999, 6), "999.999");
        assert_eq!(fmt_g(0.1, 3), "0.1");
        assert_eq!(fmt_g(0.0999755859375, 3), "0.1");
        assert_eq!(fmt_g(0.0999755859375, 6), "0.0999756");
        assert_eq!(fmt_g(0.00001, 6), "1e-05");
        assert_eq!(fmt_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(fmt_g(100000.0, 6), "100000");
        assert_eq!(fmt_g(0.0, 6), "0");
    }

    #[test]
    fn times_print_like_us_to_time() {
        assert_eq!(fmt_time(0), "0");
        assert_eq!(fmt_time(999), "0");
        assert_eq!(fmt_time(500_000), "500us");
        assert_eq!(fmt_time(5 * NS_PER_MS), "5ms");
        assert_eq!(fmt_time(2_500_000), "2.5ms");
        assert_eq!(fmt_time(1_234_567), "1.234ms");
        assert_eq!(fmt_time(1_500 * NS_PER_MS), "1.5s");
    }
}
