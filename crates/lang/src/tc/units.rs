//! iproute2's number forms, read and printed as tc(8) does: times (bare
//! microseconds, or bare nanoseconds for the 64-bit ones), rates (bare
//! bit/s; `mbit` is megabits, `mbps` megabytes), sizes, and percentages
//! held as the kernel's fraction of 2^32 - 1.

/// Microseconds in a second: tc's `TIME_UNITS_PER_SEC`.
const US_PER_S: f64 = 1e6;

/// The longest delay netem's 32-bit ticks hold, in microseconds: a kernel
/// tick is 1000/64 µs (`/proc/net/psched`), so 2^32 - 1 ticks.
pub const MAX_TICK_US: u64 = (u32::MAX as u64) * 64 / 1000;

/// A C `strtod` prefix: the number and the rest (None if no digits).
fn strtod(s: &str) -> Option<(f64, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    let mantissa = &s[digits_start..i];
    if mantissa.is_empty() || mantissa == "." {
        return None;
    }
    // An exponent only if digits follow it.
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_digits = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_digits {
            i = j;
        }
    }
    s[..i].parse::<f64>().ok().map(|x| (x, &s[i..]))
}

fn is_any(unit: &str, names: &[&str]) -> bool {
    names.iter().any(|n| unit.eq_ignore_ascii_case(n))
}

/// A netem delay or jitter (`get_time`): microseconds, a bare number being
/// microseconds. None for anything tc refuses.
pub fn time_us(s: &str) -> Option<u64> {
    let (t, unit) = strtod(s)?;
    let scale = if unit.is_empty() || is_any(unit, &["us", "usec", "usecs"]) {
        1.0
    } else if is_any(unit, &["s", "sec", "secs"]) {
        US_PER_S
    } else if is_any(unit, &["ms", "msec", "msecs"]) {
        US_PER_S / 1e3
    } else {
        return None;
    };
    let us = t * scale;
    (us.is_finite() && us >= 0.0 && us <= u32::MAX as f64).then_some(us as u64)
}

/// A 64-bit time (`get_time64`, netem's `slot`): nanoseconds, a bare
/// number being nanoseconds.
pub fn time_ns(s: &str) -> Option<u64> {
    let (t, unit) = strtod(s)?;
    let scale = if unit.is_empty() || is_any(unit, &["ns", "nsec", "nsecs"]) {
        1.0
    } else if is_any(unit, &["s", "sec", "secs"]) {
        1e9
    } else if is_any(unit, &["ms", "msec", "msecs"]) {
        1e6
    } else if is_any(unit, &["us", "usec", "usecs"]) {
        1e3
    } else {
        return None;
    };
    let ns = t * scale;
    (ns.is_finite() && ns >= 0.0 && ns <= i64::MAX as f64).then_some(ns as u64)
}

/// tc's rate units, as multipliers to bit/s (`get_rate64`'s table; matched
/// without regard to case, so `mbps` is `MBps`, megabytes per second).
const RATE_UNITS: &[(&str, f64)] = &[
    ("bit", 1.0),
    ("kibit", 1024.0),
    ("kbit", 1e3),
    ("mibit", 1024.0 * 1024.0),
    ("mbit", 1e6),
    ("gibit", 1024.0 * 1024.0 * 1024.0),
    ("gbit", 1e9),
    ("tibit", 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("tbit", 1e12),
    ("bps", 8.0),
    ("kibps", 8.0 * 1024.0),
    ("kbps", 8e3),
    ("mibps", 8.0 * 1024.0 * 1024.0),
    ("mbps", 8e6),
    ("gibps", 8.0 * 1024.0 * 1024.0 * 1024.0),
    ("gbps", 8e9),
    ("tibps", 8.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("tbps", 8e12),
];

/// A rate in bit/s (`get_rate64`: a bare number is bit/s). tc keeps
/// bytes/s, so the result is rounded down to a multiple of 8 bit/s.
pub fn rate_bps(s: &str) -> Option<u64> {
    let (x, unit) = strtod(s)?;
    let scale = if unit.is_empty() {
        1.0
    } else {
        RATE_UNITS
            .iter()
            .find(|(n, _)| unit.eq_ignore_ascii_case(n))?
            .1
    };
    let bytes = (x * scale / 8.0).floor();
    // The float bound rounds (u64::MAX as f64 is 2^64): the product is
    // checked, not the bound trusted.
    (bytes.is_finite() && bytes >= 0.0)
        .then_some(bytes as u64)
        .and_then(|b| b.checked_mul(8))
}

/// A size in bytes (`get_size`: `k`/`kb` are KiB, `kbit` is 128 bytes).
pub fn size_bytes(s: &str) -> Option<u64> {
    let (x, unit) = strtod(s)?;
    let scale = if unit.is_empty() || unit.eq_ignore_ascii_case("b") {
        1.0
    } else if is_any(unit, &["k", "kb"]) {
        1024.0
    } else if is_any(unit, &["m", "mb"]) {
        1024.0 * 1024.0
    } else if is_any(unit, &["g", "gb"]) {
        1024.0 * 1024.0 * 1024.0
    } else if unit.eq_ignore_ascii_case("kbit") {
        1024.0 / 8.0
    } else if unit.eq_ignore_ascii_case("mbit") {
        1024.0 * 1024.0 / 8.0
    } else if unit.eq_ignore_ascii_case("gbit") {
        1024.0 * 1024.0 * 1024.0 / 8.0
    } else {
        return None;
    };
    let n = x * scale;
    (n.is_finite() && n >= 0.0 && n <= u32::MAX as f64).then_some(n as u64)
}

/// A probability as the kernel holds it: a fraction of 2^32 - 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Percent(pub u32);

impl Percent {
    pub const ALL: Percent = Percent(u32::MAX);

    /// From a fraction in 0..=1, rounded as tc rounds.
    pub fn from_fraction(f: f64) -> Percent {
        Percent((f * u32::MAX as f64).round() as u32)
    }

    /// `30%` or a bare `30` (both thirty percent, as tc reads them).
    pub fn parse(s: &str) -> Option<Percent> {
        let (x, rest) = strtod(s)?;
        if !(rest.is_empty() || rest == "%") {
            return None;
        }
        let f = x / 100.0;
        (0.0..=1.0).contains(&f).then(|| Percent::from_fraction(f))
    }

    pub fn fraction(self) -> f64 {
        self.0 as f64 / u32::MAX as f64
    }

    /// The complement (`1 - p`), exactly as the kernel computes it.
    pub fn complement(self) -> Percent {
        Percent(u32::MAX - self.0)
    }
}

impl std::fmt::Display for Percent {
    /// tc's `%g%%`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", fmt_g(100.0 * self.fraction(), 6))
    }
}

/// C's `%.{precision}g`: that many significant digits, trailing zeros
/// dropped, exponent form below 1e-4 or from 10^precision.
pub fn fmt_g(x: f64, precision: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let p = precision.max(1);
    // The exponent after rounding to p significant digits.
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A netem time (whole microseconds) as `tc qdisc show` prints it.
pub fn fmt_time_us(us: u64) -> String {
    let t = us as f64;
    if t >= US_PER_S {
        format!("{}s", fmt_g(t / US_PER_S, 3))
    } else if t >= US_PER_S / 1e3 {
        format!("{}ms", fmt_g(t / 1e3, 3))
    } else {
        format!("{us}us")
    }
}

/// A 64-bit time (nanoseconds) as `tc qdisc show` prints it.
pub fn fmt_time_ns(ns: u64) -> String {
    let t = ns as f64;
    if t >= 1e9 {
        format!("{}s", fmt_g(t / 1e9, 3))
    } else if t >= 1e6 {
        format!("{}ms", fmt_g(t / 1e6, 3))
    } else if t >= 1e3 {
        format!("{}us", fmt_g(t / 1e3, 3))
    } else {
        format!("{ns}ns")
    }
}

/// A rate in bit/s as tc prints it: `20Kbit`, `1500Kbit`, `1Mbit`; with
/// `iec`, powers of 1024 (`Kibit`).
pub fn fmt_rate(bps: u64, iec: bool) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    let kilo: u64 = if iec { 1024 } else { 1000 };
    let mut rate = bps;
    let mut i = 0;
    while i < UNITS.len() - 1 {
        if rate < kilo || (!rate.is_multiple_of(kilo) && rate < 1000 * kilo) {
            break;
        }
        rate /= kilo;
        i += 1;
    }
    format!("{rate}{}{}bit", UNITS[i], if iec { "i" } else { "" })
}

/// A size in bytes as tc prints it: `1514b`, `32Kb`, `1Mb`.
pub fn fmt_size(bytes: u64) -> String {
    let b = bytes as f64;
    const MB: f64 = 1024.0 * 1024.0;
    if b >= MB && (MB * (b / MB).round() - b).abs() < 1024.0 {
        format!("{}Mb", fmt_g((b / MB).round(), 6))
    } else if b >= 1024.0 && (1024.0 * (b / 1024.0).round() - b).abs() < 16.0 {
        format!("{}Kb", fmt_g((b / 1024.0).round(), 6))
    } else {
        format!("{bytes}b")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the commands_file fuzzer: `rate 77777777777777777770`
    /// overflowed (the float bound let 2^61 bytes through, times 8).
    #[test]
    fn a_rate_past_u64_is_refused_not_a_panic() {
        assert_eq!(rate_bps("77777777777777777770"), None);
        assert_eq!(rate_bps("18446744073709551615"), None);
        assert_eq!(rate_bps("1e300gbit"), None);
        assert_eq!(rate_bps("10mbit"), Some(10_000_000));
    }

    #[test]
    fn times_read_as_tc_reads_them() {
        assert_eq!(time_us("100ms"), Some(100_000));
        assert_eq!(time_us("100"), Some(100), "a bare delay is microseconds");
        assert_eq!(time_us("1.5s"), Some(1_500_000));
        assert_eq!(time_us("10usec"), Some(10));
        assert_eq!(time_us("10MS"), Some(10_000));
        assert_eq!(time_us("10 ms"), None);
        assert_eq!(time_us("10ns"), None, "netem's delay has no nanoseconds");
        assert_eq!(time_us("ms"), None);
        assert_eq!(time_ns("10"), Some(10), "a bare slot time is nanoseconds");
        assert_eq!(time_ns("2ms"), Some(2_000_000));
        assert_eq!(time_ns("7nsec"), Some(7));
    }

    #[test]
    fn rates_keep_tcs_units_trap() {
        assert_eq!(rate_bps("1mbit"), Some(1_000_000));
        assert_eq!(rate_bps("1mbps"), Some(8_000_000), "mbps is megabytes");
        assert_eq!(rate_bps("1MBps"), Some(8_000_000));
        assert_eq!(rate_bps("20000"), Some(20_000), "a bare rate is bit/s");
        assert_eq!(rate_bps("1kibit"), Some(1024));
        assert_eq!(rate_bps("1.5gbit"), Some(1_500_000_000));
        assert_eq!(rate_bps("1mb"), None);
        assert_eq!(fmt_rate(20_000, false), "20Kbit");
        assert_eq!(fmt_rate(1_500_000, false), "1500Kbit");
        assert_eq!(fmt_rate(1_000_000, false), "1Mbit");
        assert_eq!(fmt_rate(8_000_000_000, false), "8Gbit");
        assert_eq!(fmt_rate(999, false), "999bit");
        assert_eq!(fmt_rate(1024 * 1024, true), "1Mibit");
    }

    #[test]
    fn sizes_and_percentages() {
        assert_eq!(size_bytes("32kbit"), Some(4096));
        assert_eq!(size_bytes("10k"), Some(10240));
        assert_eq!(size_bytes("1514"), Some(1514));
        assert_eq!(size_bytes("3x"), None);
        assert_eq!(fmt_size(4096), "4Kb");
        assert_eq!(fmt_size(1514), "1514b");
        assert_eq!(fmt_size(3 * 1024 * 1024), "3Mb");
        let p = Percent::parse("0.3%").unwrap();
        assert_eq!(p.to_string(), "0.3%");
        assert_eq!(Percent::parse("25").unwrap().to_string(), "25%");
        assert_eq!(Percent::parse("100%"), Some(Percent::ALL));
        assert_eq!(Percent::parse("101%"), None);
        assert_eq!(Percent::parse("-1%"), None);
        assert_eq!(Percent::parse("5%x"), None);
        assert!((Percent::parse("0.3%").unwrap().fraction() - 0.003).abs() < 1e-9);
    }

    #[test]
    fn printed_as_tc_prints() {
        assert_eq!(fmt_time_us(100_000), "100ms");
        assert_eq!(fmt_time_us(10), "10us");
        assert_eq!(fmt_time_us(1_500_000), "1.5s");
        assert_eq!(fmt_time_us(123_456), "123ms");
        assert_eq!(fmt_time_ns(10), "10ns");
        assert_eq!(fmt_time_ns(200), "200ns");
        assert_eq!(fmt_time_ns(2_500), "2.5us");
        assert_eq!(fmt_g(0.0001, 6), "0.0001");
        assert_eq!(fmt_g(0.00001, 6), "1e-05");
        assert_eq!(fmt_g(1234567.0, 6), "1.23457e+06");
        assert_eq!(fmt_g(30.000000001, 6), "30");
    }
}
