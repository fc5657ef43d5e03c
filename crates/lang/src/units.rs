//! Numbers with units: bandwidths, delays, sizes, probabilities, masks.
//!
//! Values are computed in exact decimal arithmetic, so `1.5Mbit/s` is
//! 1 500 000 bit/s and `0.1ms` is 100 000 ns, with no float rounding. Each
//! function returns a [`ValueError`] rather than a [`crate::ParseError`], so
//! the caller can point it at the token the value came from.

use std::net::{Ipv4Addr, Ipv6Addr};

use dummynet_engine::config::QueueLimit;
use dummynet_engine::rng::Probability;
use dummynet_engine::time::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};

use ValueError::{Malformed, OutOfRange, Unavailable};

/// Why a value was refused; the message is a complete sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueError {
    /// Not a value of the expected form (`10Mbitz/s`).
    Malformed(String),
    /// Well formed but outside the allowed range (`weight 200`).
    OutOfRange(String),
    /// A form FreeBSD takes that this build does not (`bw tun0`).
    Unavailable(String),
}

impl ValueError {
    /// The kind of parse error it makes.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Malformed(_) => crate::ErrorKind::Syntax,
            OutOfRange(_) => crate::ErrorKind::Range,
            Unavailable(_) => crate::ErrorKind::Unavailable,
        }
    }

    pub fn into_message(self) -> String {
        match self {
            Malformed(m) | OutOfRange(m) | Unavailable(m) => m,
        }
    }

    /// The same error with its message changed by `f`.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Malformed(m) => Malformed(f(m)),
            OutOfRange(m) => OutOfRange(f(m)),
            Unavailable(m) => Unavailable(f(m)),
        }
    }
}

/// A non-negative decimal `digits / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    digits: u128,
    scale: u32,
}

impl Decimal {
    /// `value * factor`, rounded to the nearest integer (halves up).
    fn times(self, factor: u128) -> Option<u128> {
        let num = self.digits.checked_mul(factor)?;
        let den = 10u128.checked_pow(self.scale)?;
        Some(num.checked_add(den / 2)? / den)
    }

    fn is_whole(self) -> bool {
        10u128
            .checked_pow(self.scale)
            .is_some_and(|den| self.digits.is_multiple_of(den))
    }

    fn as_f64(self) -> f64 {
        self.digits as f64 / 10f64.powi(self.scale as i32)
    }
}

/// Splits `12.5Mbit/s` into the number and the rest (`Mbit/s`); `None` if
/// it does not start with a number.
fn split_number(s: &str) -> Option<(Decimal, &str)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    // 30 digits keep `digits * factor` (factor <= 10^12) inside u128.
    if int.is_empty() && frac.is_empty() || frac.contains('.') || int.len() + frac.len() > 30 {
        return None;
    }
    let digits = format!("{int}{frac}").parse::<u128>().ok()?;
    Some((
        Decimal {
            digits,
            scale: frac.len() as u32,
        },
        rest,
    ))
}

/// An unsigned integer, decimal or `0x` hex.
pub(crate) fn integer(s: &str) -> Option<u128> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    // `from_str_radix` would also take a sign.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u128::from_str_radix(digits, radix).ok()
}

/// A decimal integer in `lo..=hi`; `what` names it in the message, which
/// gives the range.
pub(crate) fn number_in(s: &str, what: &str, lo: u64, hi: u64) -> Result<u64, ValueError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Malformed(format!(
            "expected a {what} ({lo}..{hi}), found `{s}`"
        )));
    }
    match s.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(OutOfRange(format!(
            "{what} must be in {lo}..{hi}, found `{s}`"
        ))),
    }
}

/// Largest accepted bandwidth: well above any real link, far below overflow.
const MAX_BW: u128 = 10_000_000_000_000;

/// FreeBSD's `bw`: a number, an optional k/M/G multiplier (powers of 1000), and
/// a unit. Bits unless the unit says bytes: `byte(s)` in any case, or a
/// capital `B` on its own (`KB/s`, `MBps`), as FreeBSD reads `B` not followed
/// by `it`. A bare number is bit/s and 0 means unlimited.
pub(crate) fn bandwidth(s: &str) -> Result<u64, ValueError> {
    let help = || {
        Malformed(format!(
            "expected a bandwidth such as 10Mbit/s, 300Kbit/s, 2KByte/s or 1.5Gbit/s \
             (bit/s, Kbit/s, Mbit/s, Gbit/s, Tbit/s, Byte/s, KByte/s, MByte/s, GByte/s), \
             found `{s}`"
        ))
    };
    // FreeBSD's `bw tun0`: the rate a device reports, for tun/tap devices
    // whose driver sets it. A device name has a unit number (`tun0`); a
    // word without one (`off`, `fast`) is no bandwidth at all.
    let device = s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.contains(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if device {
        return Err(Unavailable(format!(
            "`bw {s}` would take the bandwidth from device `{s}`, which dummynet for Linux \
             does not do (Linux devices report no rate it could follow); give a rate such \
             as 10Mbit/s"
        )));
    }
    let (value, rest) = split_number(s).ok_or_else(help)?;
    let (mult, unit) = match rest.chars().next() {
        Some('k' | 'K') => (1_000, &rest[1..]),
        Some('m' | 'M') => (1_000_000, &rest[1..]),
        Some('g' | 'G') => (1_000_000_000, &rest[1..]),
        Some('t' | 'T') => (1_000_000_000_000, &rest[1..]),
        _ => (1, rest),
    };
    let unit = unit
        .strip_suffix("/s")
        .or_else(|| unit.strip_suffix("ps"))
        .unwrap_or(unit);
    let per_unit = match unit {
        "" | "b" => 1,
        "B" => 8,
        u if u.eq_ignore_ascii_case("bit") || u.eq_ignore_ascii_case("bits") => 1,
        u if u.eq_ignore_ascii_case("byte") || u.eq_ignore_ascii_case("bytes") => 8,
        _ => return Err(help()),
    };
    match value.times(mult * per_unit) {
        Some(bw) if bw <= MAX_BW => Ok(bw as u64),
        _ => Err(OutOfRange(format!(
            "bandwidth `{s}` is too large (at most 10 Tbit/s)"
        ))),
    }
}

/// FreeBSD's `delay`: a bare number is milliseconds; `ms`, `us`, `ns` and `s`
/// suffixes and decimals are accepted here as well. Returns nanoseconds.
pub(crate) fn delay(s: &str) -> Result<Nanos, ValueError> {
    let help = || {
        Malformed(format!(
            "expected a delay such as 10, 10ms, 250us or 1.5s (a bare number is ms), found `{s}`"
        ))
    };
    let (value, unit) = split_number(s).ok_or_else(help)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" | "msec" => NS_PER_MS,
        "us" | "µs" | "usec" => NS_PER_US,
        "ns" | "nsec" => 1,
        "s" | "sec" => NS_PER_SEC,
        _ => return Err(help()),
    };
    value
        .times(u128::from(scale))
        .and_then(|ns| u64::try_from(ns).ok())
        .ok_or_else(|| OutOfRange(format!("delay `{s}` is too large")))
}

/// A size in bytes with an optional K/M/G multiplier (powers of 1024) and an
/// optional `B`/`byte(s)` unit: `burst 64KB`, `burst 1M`, `burst 1500`.
pub(crate) fn bytes(s: &str) -> Result<u64, ValueError> {
    let help = || {
        Malformed(format!(
            "expected a size in bytes such as 1500, 64KB or 2MBytes, found `{s}`"
        ))
    };
    let (value, rest) = split_number(s).ok_or_else(help)?;
    let (mult, unit) = binary_multiplier(rest);
    if !is_byte_unit(unit) {
        return Err(help());
    }
    value
        .times(mult)
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| OutOfRange(format!("size `{s}` is too large")))
}

/// FreeBSD's `queue`: a bare number is a length in packets (slots); with a
/// K suffix or a byte unit it is a length in bytes, K being 1024
/// (`queue 200kb` is 204800 bytes, as in FreeBSD).
pub(crate) fn queue_limit(s: &str) -> Result<QueueLimit, ValueError> {
    let help = || {
        Malformed(format!(
            "expected a queue size: slots (50) or bytes (200kb, 1000KBytes, 9000B), found `{s}`"
        ))
    };
    let (value, rest) = split_number(s).ok_or_else(help)?;
    let too_large = || OutOfRange(format!("queue size `{s}` is too large"));
    let limit = if rest.is_empty() {
        if !value.is_whole() {
            return Err(Malformed(format!(
                "a queue length in slots is a whole number, found `{s}`"
            )));
        }
        QueueLimit::Slots(
            value
                .times(1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(too_large)?,
        )
    } else {
        // `k` alone means kilobytes: FreeBSD never reads a suffixed size as slots.
        let (mult, unit) = binary_multiplier(rest);
        if !is_byte_unit(unit) {
            return Err(help());
        }
        QueueLimit::Bytes(
            value
                .times(mult)
                .and_then(|b| u64::try_from(b).ok())
                .ok_or_else(too_large)?,
        )
    };
    match limit {
        QueueLimit::Slots(0) | QueueLimit::Bytes(0) => Err(OutOfRange(format!(
            "a queue must hold something, found `{s}`"
        ))),
        l => Ok(l),
    }
}

fn binary_multiplier(rest: &str) -> (u128, &str) {
    match rest.chars().next() {
        Some('k' | 'K') => (1 << 10, &rest[1..]),
        Some('m' | 'M') => (1 << 20, &rest[1..]),
        Some('g' | 'G') => (1 << 30, &rest[1..]),
        _ => (1, rest),
    }
}

fn is_byte_unit(u: &str) -> bool {
    ["", "b", "byte", "bytes"]
        .iter()
        .any(|x| u.eq_ignore_ascii_case(x))
}

/// A probability in `[0, 1]`: a fraction (`0.05`, as ipfw writes `prob` and
/// `plr`) or a percentage (`5%`, as netem writes its options). Unlike tc,
/// which reads every probability as a percentage, a bare number is a
/// fraction here, so ipfw's `plr 0.05` keeps its meaning; a bare number
/// above 1 gets a hint to add `%`.
pub(crate) fn probability(s: &str) -> Result<Probability, ValueError> {
    let help = || {
        Malformed(format!(
            "expected a probability such as 0.05 or 5% (between 0 and 1, or 0% and 100%), \
             found `{s}`"
        ))
    };
    let (value, rest) = split_number(s).ok_or_else(help)?;
    let v = match rest {
        "" => value.as_f64(),
        // Divided as a decimal, so `0.1%` is exactly what `0.001` is.
        "%" => Decimal {
            digits: value.digits,
            scale: value.scale + 2,
        }
        .as_f64(),
        _ => return Err(help()),
    };
    Probability::new(v).ok_or_else(|| {
        let hint = if rest.is_empty() && v <= 100.0 {
            format!(" (for {s} percent, write `{s}%`)")
        } else {
            String::new()
        };
        OutOfRange(format!(
            "a probability must be between 0 and 1 (0% and 100%), found `{s}`{hint}"
        ))
    })
}

/// A time for an impairment (`jitter 5ms`, `slot 10ms`), read as `delay`
/// is (a bare number is milliseconds); `what` names it in the message.
pub(crate) fn time(s: &str, what: &str) -> Result<Nanos, ValueError> {
    if s.strip_prefix('-').is_some_and(|rest| delay(rest).is_ok()) {
        return Err(OutOfRange(format!(
            "`{what}` cannot be negative, found `{s}`"
        )));
    }
    delay(s).map_err(|e| match e {
        Malformed(_) => Malformed(format!(
            "expected a time for `{what}` such as 5ms, 500us or 1.5s \
             (a bare number is ms), found `{s}`"
        )),
        OutOfRange(_) => OutOfRange(format!("`{what}` time `{s}` is too large")),
        other => other,
    })
}

/// A time that must carry its unit: `at 5s`, `repeat every 1500ms`. A
/// bare `5` is refused, since ipfw's bare numbers are milliseconds while a
/// schedule is naturally written in seconds. Units: `ns`, `us`, `ms`, `s`,
/// `min`, `h`.
pub(crate) fn time_with_unit(s: &str, what: &str) -> Result<Nanos, ValueError> {
    let help = |why: &str| {
        Malformed(format!(
            "expected a time with its unit after `{what}`, such as 5s, 1500ms or 2min{why}, \
             found `{s}`"
        ))
    };
    let (value, unit) = split_number(s).ok_or_else(|| help(""))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" => return Err(help(" (a bare number could mean seconds or milliseconds)")),
        "ns" | "nsec" => 1,
        "us" | "µs" | "usec" => NS_PER_US,
        "ms" | "msec" => NS_PER_MS,
        "s" | "sec" => NS_PER_SEC,
        "min" => 60 * NS_PER_SEC,
        "h" => 3600 * NS_PER_SEC,
        _ => return Err(help("")),
    };
    value
        .times(u128::from(scale))
        .and_then(|ns| u64::try_from(ns).ok())
        .ok_or_else(|| OutOfRange(format!("`{what}` time `{s}` is too large")))
}

/// A whole number of bytes that may be negative (`overhead -14`), in
/// `-max..=max`.
pub(crate) fn signed_in(s: &str, what: &str, max: i64) -> Result<i64, ValueError> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Malformed(format!(
            "expected a whole number of bytes for `{what}` (-{max}..{max}), found `{s}`"
        )));
    }
    match s.parse::<i64>() {
        Ok(n) if (-max..=max).contains(&n) => Ok(n),
        _ => Err(OutOfRange(format!(
            "`{what}` must be in -{max}..{max} bytes, found `{s}`"
        ))),
    }
}

/// A decimal fraction in `lo..=hi` (`lo` excluded when `open_lo`), for
/// RED's `w_q`/`max_p` and PIE's `alpha`/`beta`/`max_ecnth`. `what` names
/// the parameter in the message.
pub(crate) fn fraction(
    s: &str,
    what: &str,
    (lo, hi): (f64, f64),
    open_lo: bool,
) -> Result<f64, ValueError> {
    let range = if open_lo {
        format!("{lo} < {what} <= {hi}")
    } else {
        format!("{lo} <= {what} <= {hi}")
    };
    let (value, _) = split_number(s)
        .filter(|(_, rest)| rest.is_empty())
        .ok_or_else(|| {
            Malformed(format!(
                "expected a decimal number for `{what}` ({range}), found `{s}`"
            ))
        })?;
    let v = value.as_f64();
    if v > hi || v < lo || (open_lo && v == lo) {
        return Err(OutOfRange(format!(
            "`{what}` must be in {range}, found `{s}`"
        )));
    }
    Ok(v)
}

/// A time for an AQM parameter, as FreeBSD's `time_to_us` reads it: a bare
/// number is milliseconds, `us`, `ms` and `s` suffixes (and `ns` here).
pub(crate) fn aqm_time(s: &str, what: &str) -> Result<Nanos, ValueError> {
    delay(s).map_err(|e| match e {
        Malformed(_) => Malformed(format!(
            "expected a time for `{what}` such as 5, 5ms, 500us or 1s \
             (a bare number is ms; units us, ms, s), found `{s}`"
        )),
        OutOfRange(_) => OutOfRange(format!("`{what}` time `{s}` is too large")),
        other => other,
    })
}

/// A RED threshold: a whole number, times 1024 with a `K` suffix, as ipfw
/// reads `min_th` and `max_th`.
pub(crate) fn red_threshold(s: &str, what: &str) -> Result<u64, ValueError> {
    let (digits, mult) = match s.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1024u64),
        None => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Malformed(format!(
            "expected a whole number for `{what}`, optionally with K (x1024), found `{s}`"
        )));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n <= u64::from(u32::MAX))
        .ok_or_else(|| OutOfRange(format!("`{what}` `{s}` is too large")))
}

/// A probability written so that it parses back to the same value: FreeBSD's
/// six decimals when they suffice, more digits otherwise.
pub(crate) fn format_probability(p: Probability) -> String {
    (6..=12)
        .map(|prec| format!("{:.*}", prec, p.as_f64()))
        .find(|s| probability(s).ok() == Some(p))
        .unwrap_or_else(|| format!("{}", p.as_f64()))
}

/// An IPv4 mask for `mask src-ip M`: hex or decimal (`0x000000ff`), dotted
/// (`255.255.255.0`), or a prefix length (`/24`).
pub(crate) fn ipv4_mask(s: &str) -> Result<u32, ValueError> {
    if let Some(len) = s.strip_prefix('/') {
        return match integer(len).filter(|_| !len.starts_with("0x")) {
            Some(n @ 0..=32) => Ok(u32::MAX.checked_shl(32 - n as u32).unwrap_or(0)),
            _ => Err(OutOfRange(format!(
                "an IPv4 prefix length must be in 0..32, found `{s}`"
            ))),
        };
    }
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        return Ok(u32::from(a));
    }
    match integer(s) {
        Some(m) => u32::try_from(m)
            .map_err(|_| OutOfRange(format!("an IPv4 mask must fit in 32 bits, found `{s}`"))),
        None => Err(Malformed(format!(
            "expected an IPv4 mask such as 0xffffff00, 255.255.255.0 or /24, found `{s}`"
        ))),
    }
}

/// An IPv6 mask for `mask src-ip6 M`: a prefix length (`/64` or `64`, as
/// FreeBSD reads a bare number here) or an address-style mask (`ffff:ffff::`).
pub(crate) fn ipv6_mask(s: &str) -> Result<u128, ValueError> {
    let len = s.strip_prefix('/').unwrap_or(s);
    if !len.is_empty() && len.bytes().all(|b| b.is_ascii_digit()) {
        return match len.parse::<u32>() {
            Ok(n @ 0..=128) => Ok(u128::MAX.checked_shl(128 - n).unwrap_or(0)),
            _ => Err(OutOfRange(format!(
                "an IPv6 prefix length must be in 0..128, found `{s}`"
            ))),
        };
    }
    s.parse::<Ipv6Addr>().map(u128::from).map_err(|_| {
        Malformed(format!(
            "expected an IPv6 mask such as /64 or ffff:ffff:ffff:ffff::, found `{s}`"
        ))
    })
}

/// An integer mask of `bits` bits, hex or decimal (`mask dst-port 0xffff`).
pub(crate) fn field_mask(s: &str, bits: u32) -> Result<u128, ValueError> {
    let max = (1u128 << bits) - 1;
    match integer(s) {
        Some(m) if m <= max => Ok(m),
        Some(_) => Err(OutOfRange(format!(
            "this mask has {bits} bits (at most {max:#x}), found `{s}`"
        ))),
        None => Err(Malformed(format!(
            "expected a mask such as {max:#x}, found `{s}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_units() {
        let cases = [
            ("10MBit/s", 10_000_000),
            ("1mbits/s", 1_000_000),
            ("300Kbit/s", 300_000),
            ("100Gbit/s", 100_000_000_000),
            ("10Tbit/s", 10_000_000_000_000),
            ("1.5tbit/s", 1_500_000_000_000),
            ("2KByte/s", 16_000),
            ("0", 0),
            ("1.5Mbit/s", 1_500_000),
            ("640Kbit/s", 640_000),
            ("12345", 12_345),
            ("1MB/s", 8_000_000),
            ("1Mb/s", 1_000_000),
            ("10Mbps", 10_000_000),
            ("10MBps", 80_000_000),
            ("3mbytes/s", 24_000_000),
            ("1GByte/s", 8_000_000_000),
            ("50Mbit", 50_000_000),
            ("1bit/s", 1),
            ("8Byte/s", 64),
        ];
        for (s, bw) in cases {
            assert_eq!(bandwidth(s), Ok(bw), "{s}");
        }
        // A device's rate (FreeBSD's `bw tun0`): said so, not "malformed".
        for device in ["tun0", "em0", "vtnet1.5"] {
            let e = bandwidth(device).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Unavailable, "{device}");
            assert!(e.into_message().contains("from device"));
        }
        for bad in [
            "fast",
            "off",
            "11Tbit/s",
            "1.2.3",
            "10 Mbit/s",
            "Mbit/s",
            "10Mbit/h",
            "99999999999999Gbit/s",
        ] {
            assert!(bandwidth(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn delays() {
        assert_eq!(delay("10ms"), Ok(10 * NS_PER_MS));
        assert_eq!(delay("10"), Ok(10 * NS_PER_MS));
        assert_eq!(delay("250us"), Ok(250 * NS_PER_US));
        assert_eq!(delay("1.5s"), Ok(1_500 * NS_PER_MS));
        assert_eq!(delay("0.1ms"), Ok(100 * NS_PER_US));
        assert_eq!(delay("0"), Ok(0));
        assert_eq!(delay("2.5"), Ok(2_500 * NS_PER_US));
        assert!(delay("10 ms").is_err());
        assert!(delay("10h").is_err());
        assert!(delay("99999999999999s").is_err());
    }

    #[test]
    fn queue_sizes() {
        assert_eq!(queue_limit("200kb"), Ok(QueueLimit::Bytes(204_800)));
        assert_eq!(queue_limit("1000kb"), Ok(QueueLimit::Bytes(1_024_000)));
        assert_eq!(queue_limit("1000KBytes"), Ok(QueueLimit::Bytes(1_024_000)));
        assert_eq!(queue_limit("9000B"), Ok(QueueLimit::Bytes(9_000)));
        assert_eq!(queue_limit("9000bytes"), Ok(QueueLimit::Bytes(9_000)));
        assert_eq!(queue_limit("64K"), Ok(QueueLimit::Bytes(65_536)));
        assert_eq!(queue_limit("20"), Ok(QueueLimit::Slots(20)));
        assert!(queue_limit("0").is_err());
        assert!(queue_limit("2.5").is_err());
        assert!(queue_limit("20 slots").is_err());
        assert!(queue_limit("20x").is_err());
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(bytes("1500"), Ok(1500));
        assert_eq!(bytes("64KB"), Ok(65_536));
        assert_eq!(bytes("2MBytes"), Ok(2 << 20));
        assert_eq!(bytes("1G"), Ok(1 << 30));
        assert!(bytes("1Mbit").is_err());
    }

    #[test]
    fn probabilities_round_trip() {
        for s in [
            "0",
            "1",
            "0.5",
            "0.05",
            "0.123456",
            "0.1234567891",
            "0.000001",
        ] {
            let p = probability(s).unwrap();
            assert_eq!(probability(&format_probability(p)), Ok(p), "{s}");
        }
        assert_eq!(format_probability(probability("0.5").unwrap()), "0.500000");
        assert!(probability("1.5").is_err());
        assert!(probability("-0.1").is_err());
        // Percentages, exact as decimals.
        assert_eq!(probability("5%"), probability("0.05"));
        assert_eq!(probability("0.1%"), probability("0.001"));
        assert_eq!(probability("100%"), Ok(Probability::ONE));
        assert!(matches!(probability("150%"), Err(OutOfRange(_))));
        assert!(matches!(probability("5 %"), Err(Malformed(_))));
        assert!(matches!(probability("5%%"), Err(Malformed(_))));
        let Err(OutOfRange(m)) = probability("25") else {
            panic!()
        };
        assert!(m.contains("write `25%`"), "{m}");
    }

    #[test]
    fn impairment_times_and_offsets() {
        assert_eq!(time("5ms", "jitter"), Ok(5 * NS_PER_MS));
        assert_eq!(time("5", "jitter"), Ok(5 * NS_PER_MS));
        assert!(matches!(time("-5ms", "jitter"), Err(OutOfRange(_))));
        assert!(matches!(time("soon", "jitter"), Err(Malformed(_))));
        assert_eq!(time_with_unit("5s", "at"), Ok(5 * NS_PER_SEC));
        assert_eq!(time_with_unit("1500ms", "at"), Ok(1_500 * NS_PER_MS));
        assert_eq!(time_with_unit("2min", "at"), Ok(120 * NS_PER_SEC));
        assert_eq!(time_with_unit("1h", "at"), Ok(3_600 * NS_PER_SEC));
        assert_eq!(time_with_unit("0s", "at"), Ok(0));
        assert!(matches!(time_with_unit("5", "at"), Err(Malformed(m)) if m.contains("bare")));
        assert!(time_with_unit("5m", "at").is_err());
        assert_eq!(signed_in("-14", "overhead", 100), Ok(-14));
        assert_eq!(signed_in("24", "overhead", 100), Ok(24));
        assert!(matches!(
            signed_in("101", "overhead", 100),
            Err(OutOfRange(_))
        ));
        assert!(matches!(
            signed_in("abc", "overhead", 100),
            Err(Malformed(_))
        ));
        assert!(signed_in("+5", "overhead", 100).is_err());
    }

    #[test]
    fn masks() {
        assert_eq!(ipv4_mask("0x000000ff"), Ok(0xff));
        assert_eq!(ipv4_mask("255.255.255.0"), Ok(0xffff_ff00));
        assert_eq!(ipv4_mask("/24"), Ok(0xffff_ff00));
        assert_eq!(ipv4_mask("/0"), Ok(0));
        assert_eq!(ipv4_mask("4294967295"), Ok(u32::MAX));
        assert!(ipv4_mask("0x1ffffffff").is_err());
        assert_eq!(ipv6_mask("/64"), Ok(u128::MAX << 64));
        assert_eq!(ipv6_mask("128"), Ok(u128::MAX));
        assert_eq!(ipv6_mask("ffff::"), Ok(0xffff << 112));
        assert!(ipv6_mask("/129").is_err());
        assert_eq!(field_mask("0xffff", 16), Ok(0xffff));
        assert!(field_mask("0x10000", 16).is_err());
    }
}
