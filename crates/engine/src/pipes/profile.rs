//! Delay profiles: FreeBSD's `ipfw pipe N config profile FILE`.
//!
//! A profile describes a link whose per-packet overhead is random — a radio
//! MAC retrying, a shared medium — as an empirical distribution. The file is
//! the one FreeBSD's ipfw reads (`load_extra_delays` in `sbin/ipfw/dummynet.c`):
//!
//! ```text
//! # 802.11g-ish: most frames go straight out, some wait for retries
//! name        wlan-retries
//! bw          20Mbit/s       # optional: replaces the pipe's bw
//! loss-level  0.97           # samples above this fraction are lost
//! samples     200            # resolution of the table (default 100, max 1024)
//! prob  delay                # column order of the points; `delay prob` also works
//! 0     0.3
//! 0.6   0.5
//! 0.9   2
//! 0.97  8
//! 1     25
//! ```
//!
//! Keywords are case-insensitive, one value per line; `#` starts a comment.
//! Each point `(p, d)` says "a fraction `p` of packets have an extra delay of
//! at most `d` milliseconds": the points sample a cumulative distribution, and
//! several points at one probability make a step. [`parse`] turns them into
//! `samples` equally likely delays; [`draw`] picks one per packet.
//!
//! Compared with FreeBSD: one point is enough (FreeBSD wants two), samples
//! keep nanosecond precision (FreeBSD truncates to whole milliseconds), the
//! table is filled to its last entry (FreeBSD leaves samples past the last
//! point at zero), and `#` may follow a value without a space.

use thiserror::Error;

use crate::command::Profile;
use crate::rng::Rng;
use crate::time::{Nanos, NS_PER_MS};

/// Table size when the file has no `samples` line (FreeBSD's default).
pub const DEFAULT_SAMPLES: usize = 100;
/// FreeBSD's `ED_MAX_SAMPLES_NO`.
pub const MAX_SAMPLES: usize = 1024;
/// FreeBSD keeps samples as `int` milliseconds; we accept the same range.
pub const MAX_DELAY_MS: f64 = i32::MAX as f64;

/// Why a profile was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ProfileError {
    #[error("profile line {line}: {problem}")]
    Line { line: usize, problem: Problem },
    #[error(
        "profile has no points: after a `prob delay` (or `delay prob`) line, \
         give at least one line of two numbers, a probability in [0, 1] and a delay in ms"
    )]
    NoPoints,
}

/// What is wrong with one line.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Problem {
    #[error(
        "unknown keyword `{word}`{}; expected name, bw, loss-level, samples, \
         or a `prob delay` / `delay prob` column header",
        did_you_mean(*.suggestion)
    )]
    UnknownKeyword {
        word: String,
        suggestion: Option<&'static str>,
    },
    #[error("`{keyword}` needs a value: {allowed}")]
    MissingValue {
        keyword: &'static str,
        allowed: &'static str,
    },
    #[error("too many words after `{keyword}` (`{extra}`); {allowed}")]
    ExtraWords {
        keyword: &'static str,
        extra: String,
        allowed: &'static str,
    },
    #[error("`{keyword}` was already given on line {first}")]
    Duplicate { keyword: &'static str, first: usize },
    #[error("`{token}` is not a valid {what}; expected {allowed}")]
    BadValue {
        what: &'static str,
        token: String,
        allowed: &'static str,
    },
    #[error("{what} {token} is out of range; allowed: {allowed}")]
    OutOfRange {
        what: &'static str,
        token: String,
        allowed: &'static str,
    },
    #[error("a point before the column header; put a `prob delay` or `delay prob` line above the points")]
    PointBeforeHeader,
}

fn did_you_mean(suggestion: Option<&str>) -> String {
    suggestion
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default()
}

const KEYWORDS: [&str; 6] = ["name", "bw", "loss-level", "samples", "prob", "delay"];

const BW_ALLOWED: &str = "a rate such as 2Mbit/s: a number, an optional k, M or G, and \
                          bit/s (the default) or Byte/s; B and b abbreviate them";
const LOSS_ALLOWED: &str = "a number from 0 to 1 (1, the default, loses nothing)";
const SAMPLES_ALLOWED: &str = "an integer from 1 to 1024";
const PROB_ALLOWED: &str = "a number from 0 to 1";
const DELAY_ALLOWED: &str = "milliseconds, a number from 0 to 2147483647";
const HEADER_ALLOWED: &str = "the header is `prob delay` or `delay prob`";

/// Which column of a point line holds the probability.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Columns {
    ProbDelay,
    DelayProb,
}

#[derive(Debug, Clone, Copy)]
struct Point {
    prob: f64,
    /// Milliseconds.
    delay: f64,
}

/// Parses a profile file and builds its sample table.
pub fn parse(text: &str) -> Result<Profile, ProfileError> {
    let mut name: Option<(String, usize)> = None;
    let mut bw: Option<(u64, usize)> = None;
    let mut loss_level: Option<(f64, usize)> = None;
    let mut samples: Option<(usize, usize)> = None;
    let mut columns: Option<(Columns, usize)> = None;
    let mut points = Vec::new();

    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let at = |problem| ProfileError::Line { line, problem };
        let content = raw.split_once('#').map_or(raw, |(before, _)| before);
        let words: Vec<&str> = content.split_whitespace().collect();
        let Some((&first, rest)) = words.split_first() else {
            continue;
        };

        if starts_like_number(first) {
            let Some((cols, _)) = columns else {
                return Err(at(Problem::PointBeforeHeader));
            };
            points.push(parse_point(cols, first, rest).map_err(at)?);
            continue;
        }

        let Some(keyword) = KEYWORDS
            .iter()
            .copied()
            .find(|k| k.eq_ignore_ascii_case(first))
        else {
            return Err(at(Problem::UnknownKeyword {
                word: first.to_string(),
                suggestion: suggest(first),
            }));
        };
        let allowed = match keyword {
            "name" => "one word",
            "bw" => BW_ALLOWED,
            "loss-level" => LOSS_ALLOWED,
            "samples" => SAMPLES_ALLOWED,
            _ => HEADER_ALLOWED,
        };
        let value = match rest {
            [] => return Err(at(Problem::MissingValue { keyword, allowed })),
            [value] => *value,
            [_, extra @ ..] => {
                let allowed = if keyword == "bw" {
                    "write the rate as one word, e.g. 10Mbit/s"
                } else {
                    allowed
                };
                return Err(at(Problem::ExtraWords {
                    keyword,
                    extra: extra.join(" "),
                    allowed,
                }));
            }
        };
        let duplicate = |first: Option<usize>| match first {
            Some(first) => Err(at(Problem::Duplicate { keyword, first })),
            None => Ok(()),
        };

        match keyword {
            "name" => {
                duplicate(name.as_ref().map(|n| n.1))?;
                name = Some((value.to_string(), line));
            }
            "bw" => {
                duplicate(bw.map(|b| b.1))?;
                let bits = parse_bandwidth(value).ok_or_else(|| {
                    at(Problem::BadValue {
                        what: "bandwidth",
                        token: value.to_string(),
                        allowed: BW_ALLOWED,
                    })
                })?;
                bw = Some((bits, line));
            }
            "loss-level" => {
                duplicate(loss_level.map(|l| l.1))?;
                let level = unit_interval("loss-level", value, LOSS_ALLOWED).map_err(at)?;
                loss_level = Some((level, line));
            }
            "samples" => {
                duplicate(samples.map(|s| s.1))?;
                let n = parse_samples(value).map_err(at)?;
                samples = Some((n, line));
            }
            // "prob" or "delay": the column header.
            header => {
                if let Some((_, first)) = columns {
                    return Err(at(Problem::Duplicate {
                        keyword: "column header",
                        first,
                    }));
                }
                let cols = match (header, value.to_ascii_lowercase().as_str()) {
                    ("prob", "delay") => Columns::ProbDelay,
                    ("delay", "prob") => Columns::DelayProb,
                    _ => {
                        return Err(at(Problem::BadValue {
                            what: "column header",
                            token: format!("{first} {value}"),
                            allowed: HEADER_ALLOWED,
                        }))
                    }
                };
                columns = Some((cols, line));
            }
        }
    }

    if points.is_empty() {
        return Err(ProfileError::NoPoints);
    }
    let n = samples.map_or(DEFAULT_SAMPLES, |s| s.0);
    Ok(Profile {
        name: name.map(|n| n.0).unwrap_or_default(),
        bw: bw.map(|b| b.0),
        // FreeBSD: no `loss-level` line means no loss.
        loss_level: loss_level.map_or(1.0, |l| l.0),
        samples: sample_table(points, n),
    })
}

/// Draws the extra delay and the loss verdict for one packet.
///
/// One uniform index `i` in `0..N` picks `samples[i]`, the delay at
/// cumulative probability `i / N`. The packet is lost when
/// `i >= floor(loss_level × N)`, FreeBSD's rule in `extra_bits()`: the top
/// `1 - loss_level` of the distribution, i.e. the packets that would have
/// suffered the longest delays, are lost instead. So the loss rate is
/// `(N - floor(loss_level × N)) / N`; `loss_level` 1.0 loses nothing and 0.0
/// loses everything. The product is truncated in floating point exactly as
/// FreeBSD truncates it, so e.g. 0.29 × 100 gives 28, not 29.
///
/// A lost packet still has a delay drawn: FreeBSD charges the link for it.
pub fn draw(profile: &Profile, rng: &mut Rng) -> (Nanos, bool) {
    let n = profile.samples.len();
    if n == 0 {
        return (0, false);
    }
    let index = rng.below(u32::try_from(n).unwrap_or(u32::MAX)) as usize;
    let lost = index >= (profile.loss_level * n as f64) as usize;
    (profile.samples.get(index).copied().unwrap_or(0), lost)
}

/// `samples[i]` is the delay at cumulative probability `i / n`, linearly
/// interpolated between the points around it; the first point's delay below
/// the first point, the last one's above the last. At a step (several points
/// with one probability) the table takes the highest delay, as FreeBSD does.
fn sample_table(mut points: Vec<Point>, n: usize) -> Vec<Nanos> {
    points.sort_by(|a, b| a.prob.total_cmp(&b.prob).then(a.delay.total_cmp(&b.delay)));
    (0..n)
        .map(|i| {
            let p = i as f64 / n as f64;
            // Points at or below p; their last one starts p's segment.
            let above = points.partition_point(|pt| pt.prob <= p);
            let ms = match (
                above.checked_sub(1).and_then(|k| points.get(k)),
                points.get(above),
            ) {
                (Some(lo), Some(hi)) => {
                    lo.delay + (hi.delay - lo.delay) * (p - lo.prob) / (hi.prob - lo.prob)
                }
                (Some(only), None) | (None, Some(only)) => only.delay,
                (None, None) => 0.0,
            };
            // At most i32::MAX ms, so well inside u64 nanoseconds.
            (ms * NS_PER_MS as f64).round() as Nanos
        })
        .collect()
}

fn starts_like_number(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '.' | '-' | '+'))
}

fn parse_point(cols: Columns, first: &str, rest: &[&str]) -> Result<Point, Problem> {
    const TWO: &str = "a point is two numbers: probability and delay, in the header's order";
    let second = match rest {
        [] => {
            return Err(Problem::MissingValue {
                keyword: "point",
                allowed: TWO,
            })
        }
        [second] => *second,
        [_, extra @ ..] => {
            return Err(Problem::ExtraWords {
                keyword: "point",
                extra: extra.join(" "),
                allowed: TWO,
            })
        }
    };
    let (prob, delay) = match cols {
        Columns::ProbDelay => (first, second),
        Columns::DelayProb => (second, first),
    };
    let prob = unit_interval("probability", prob, PROB_ALLOWED)?;
    let delay_ms = decimal(delay).ok_or_else(|| Problem::BadValue {
        what: "delay",
        token: delay.to_string(),
        allowed: DELAY_ALLOWED,
    })?;
    if !(0.0..=MAX_DELAY_MS).contains(&delay_ms) {
        return Err(Problem::OutOfRange {
            what: "delay",
            token: delay.to_string(),
            allowed: DELAY_ALLOWED,
        });
    }
    Ok(Point {
        prob,
        delay: delay_ms,
    })
}

fn unit_interval(what: &'static str, token: &str, allowed: &'static str) -> Result<f64, Problem> {
    let v = decimal(token).ok_or_else(|| Problem::BadValue {
        what,
        token: token.to_string(),
        allowed,
    })?;
    if !(0.0..=1.0).contains(&v) {
        return Err(Problem::OutOfRange {
            what,
            token: token.to_string(),
            allowed,
        });
    }
    Ok(v)
}

fn parse_samples(token: &str) -> Result<usize, Problem> {
    let bad = || Problem::BadValue {
        what: "number of samples",
        token: token.to_string(),
        allowed: SAMPLES_ALLOWED,
    };
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let out_of_range = || Problem::OutOfRange {
        what: "samples",
        token: token.to_string(),
        allowed: SAMPLES_ALLOWED,
    };
    // All digits, so a failed parse can only mean too large.
    let n = token.parse::<usize>().map_err(|_| out_of_range())?;
    if !(1..=MAX_SAMPLES).contains(&n) {
        return Err(out_of_range());
    }
    Ok(n)
}

/// A plain decimal: optional sign, digits, at most one point. Rust's float
/// parser alone would also take `inf`, `NaN` and exponents, which no
/// profile means.
fn decimal(token: &str) -> Option<f64> {
    let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
    let well_formed = digits.bytes().any(|b| b.is_ascii_digit())
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.bytes().filter(|&b| b == b'.').count() <= 1;
    if !well_formed {
        return None;
    }
    token.parse().ok()
}

/// ipfw's bandwidth syntax, in bit/s: `2Mbit/s`, `500Kbit/s`, `1.5Gbit/s`,
/// `100KByte/s`, `64000`. Multipliers are decimal (k = 1000). Unit words are
/// case-insensitive; the one-letter forms follow ipfw, where `B` is a byte
/// and `b` a bit (`MB/s` vs `Mb/s`).
fn parse_bandwidth(token: &str) -> Option<u64> {
    let split = token
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(token.len());
    let (number, unit) = token.split_at(split);
    let value = decimal(number)?;
    let (multiplier, unit) = match unit.as_bytes().first() {
        Some(b'k' | b'K') => (1e3, &unit[1..]),
        Some(b'm' | b'M') => (1e6, &unit[1..]),
        Some(b'g' | b'G') => (1e9, &unit[1..]),
        _ => (1.0, unit),
    };
    let bytes = match unit {
        "" | "b" | "b/s" | "bps" => false,
        "B" | "B/s" | "Bps" => true,
        word => match word.to_ascii_lowercase().as_str() {
            "bit" | "bits" | "bit/s" | "bits/s" => false,
            "byte" | "bytes" | "byte/s" | "bytes/s" => true,
            _ => return None,
        },
    };
    let bits = value * multiplier * if bytes { 8.0 } else { 1.0 };
    // 2^64 itself is not a u64; anything below rounds into range.
    (bits < u64::MAX as f64).then(|| bits.round() as u64)
}

/// The keyword a mistyped one most likely meant: a known alias, a prefix
/// (`loss` for `loss-level`), or within two edits (`sample`, `los-level`).
fn suggest(word: &str) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    if matches!(word.as_str(), "bandwidth" | "rate") {
        return Some("bw");
    }
    if word.len() >= 3 {
        if let Some(k) = KEYWORDS
            .iter()
            .find(|k| k.starts_with(&word) || word.starts_with(*k))
        {
            return Some(k);
        }
    }
    KEYWORDS
        .iter()
        .map(|k| (edit_distance(&word, k), *k))
        .filter(|&(d, _)| d <= 2)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over bytes; keywords are ASCII and short.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    // proptest's prelude has a trait of the same name.
    use crate::rng::Rng;

    const MS: Nanos = NS_PER_MS;

    /// A profile in the shape ipfw(8) documents: a step at 50 % and a tail.
    const EXAMPLE: &str = "\
# Extra delay of a congested 3G uplink, measured with ping
name    umts-uplink
samples 100
bw      384Kbit/s
loss-level  0.86        # the slowest 14 % never make it

prob    delay
0       200             # every packet waits at least 200 ms
0.5     200
0.5     300
0.8     1000
0.9     1300
1       1300
";

    fn line_of(err: ProfileError) -> (usize, Problem) {
        match err {
            ProfileError::Line { line, problem } => (line, problem),
            other => panic!("expected a line error, got {other}"),
        }
    }

    #[test]
    fn parses_the_ipfw_style_example() {
        let p = parse(EXAMPLE).unwrap();
        assert_eq!(p.name, "umts-uplink");
        assert_eq!(p.bw, Some(384_000));
        assert_eq!(p.loss_level, 0.86);
        assert_eq!(p.samples.len(), 100);
        // Flat at 200 ms up to the step, 300 ms at it, then linear to 1000.
        assert_eq!(p.samples[0], 200 * MS);
        assert_eq!(p.samples[49], 200 * MS);
        assert_eq!(p.samples[50], 300 * MS);
        assert_eq!(p.samples[65], 650 * MS);
        assert_eq!(p.samples[80], 1000 * MS);
        assert_eq!(p.samples[85], 1150 * MS);
        assert_eq!(p.samples[99], 1300 * MS);
        assert!(
            p.samples.windows(2).all(|w| w[0] <= w[1]),
            "a CDF's quantiles never decrease"
        );
    }

    #[test]
    fn either_column_order() {
        let a = parse("prob delay\n0 10\n1 20\n").unwrap();
        let b = parse("DELAY PROB\n10 0\n20 1\n").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.samples[50], 15 * MS);
    }

    #[test]
    fn interpolation_is_exact() {
        let p = parse("samples 8\ndelay prob\n1 0.25\n3 0.75\n").unwrap();
        // i/8: 0 .125 | .25 .375 .5 .625 | .75 .875
        let expect = [1.0, 1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.0];
        let ms: Vec<f64> = p.samples.iter().map(|&ns| ns as f64 / MS as f64).collect();
        assert_eq!(ms, expect);
        // Points arrive in any order; fractions of a millisecond survive.
        let p = parse("samples 4\nprob delay\n1 0.004\n0 0.001\n").unwrap();
        assert_eq!(p.samples, [1_000, 1_750, 2_500, 3_250]);
        // One point is a constant delay; defaults: 100 samples, no loss.
        let p = parse("prob delay\n0.3 7\n").unwrap();
        assert_eq!(p.samples, vec![7 * MS; DEFAULT_SAMPLES]);
        assert_eq!((p.loss_level, p.bw, p.name.as_str()), (1.0, None, ""));
    }

    #[test]
    fn bandwidth_units() {
        let bw = |s| parse_bandwidth(s);
        assert_eq!(bw("1000"), Some(1000));
        assert_eq!(bw("2Mbit/s"), Some(2_000_000));
        assert_eq!(bw("2mbit/s"), Some(2_000_000));
        assert_eq!(bw("1.5Gbit/s"), Some(1_500_000_000));
        assert_eq!(bw("10KByte/s"), Some(80_000));
        assert_eq!(bw("10kbytes/s"), Some(80_000));
        assert_eq!(bw("1MB/s"), Some(8_000_000));
        assert_eq!(bw("1Mb/s"), Some(1_000_000));
        assert_eq!(bw("64kbps"), Some(64_000));
        assert_eq!(bw("2BITS/S"), Some(2));
        for bad in [
            "",
            "fast",
            "10Xbit/s",
            "-1Mbit/s",
            "1e6",
            "1.2.3M",
            "99999999999999999999G",
        ] {
            assert_eq!(bw(bad), None, "{bad}");
        }
    }

    #[test]
    fn errors_name_the_line_and_what_is_allowed() {
        let (line, problem) = line_of(parse("name x\nprob delay\n0 10\n0.5 1O\n").unwrap_err());
        assert_eq!(line, 4);
        assert!(
            matches!(&problem, Problem::BadValue { what: "delay", token, .. } if token == "1O")
        );

        let err = parse("prob delay\n0 1\n\n# ok so far\n1.5 3\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "profile line 5: probability 1.5 is out of range; allowed: a number from 0 to 1"
        );

        let err = parse("delay prob\n-3 0.5\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("profile line 2: delay -3 is out of range"),
            "{err}"
        );

        assert_eq!(
            parse("name x\nsamples 100\n").unwrap_err(),
            ProfileError::NoPoints
        );
        assert_eq!(parse("prob delay\n").unwrap_err(), ProfileError::NoPoints);

        let (line, problem) = line_of(parse("samples 2000\nprob delay\n0 1\n").unwrap_err());
        assert_eq!(line, 1);
        assert_eq!(
            problem.to_string(),
            "samples 2000 is out of range; allowed: an integer from 1 to 1024"
        );
        assert!(matches!(
            line_of(parse("samples 0\n").unwrap_err()).1,
            Problem::OutOfRange { .. }
        ));
        assert!(matches!(
            line_of(parse("samples 99999999999999999999999\n").unwrap_err()).1,
            Problem::OutOfRange { .. }
        ));
        assert!(matches!(
            line_of(parse("samples 1.5\n").unwrap_err()).1,
            Problem::BadValue { .. }
        ));

        let err = parse("name x\nsample 50\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("profile line 2: unknown keyword `sample` (did you mean `samples`?)"),
            "{err}"
        );
        let suggestion = |w: &str| match line_of(parse(w).unwrap_err()).1 {
            Problem::UnknownKeyword { suggestion, .. } => suggestion,
            other => panic!("{other}"),
        };
        assert_eq!(suggestion("loss 0.5"), Some("loss-level"));
        assert_eq!(suggestion("loss_level 0.5"), Some("loss-level"));
        assert_eq!(suggestion("bandwidth 1M"), Some("bw"));
        assert_eq!(suggestion("nmae x"), Some("name"));
        assert_eq!(suggestion("probability delay"), Some("prob"));
        assert_eq!(suggestion("frobnicate 1"), None);
    }

    #[test]
    fn structural_errors() {
        let problem = |text: &str| line_of(parse(text).unwrap_err());
        assert_eq!(problem("0 10\n").1, Problem::PointBeforeHeader);
        assert!(matches!(
            problem("name\n").1,
            Problem::MissingValue {
                keyword: "name",
                ..
            }
        ));
        assert!(matches!(
            problem("bw 10 Mbit/s\n").1,
            Problem::ExtraWords { keyword: "bw", .. }
        ));
        assert!(matches!(
            problem("prob delay\n0.5\n"),
            (
                2,
                Problem::MissingValue {
                    keyword: "point",
                    ..
                }
            )
        ));
        assert!(matches!(
            problem("prob delay\n0.5 1 2\n"),
            (
                2,
                Problem::ExtraWords {
                    keyword: "point",
                    ..
                }
            )
        ));
        assert_eq!(
            problem("name a\n\nname b\n"),
            (
                3,
                Problem::Duplicate {
                    keyword: "name",
                    first: 1
                }
            )
        );
        assert_eq!(
            problem("prob delay\n0 1\ndelay prob\n"),
            (
                3,
                Problem::Duplicate {
                    keyword: "column header",
                    first: 1
                }
            )
        );
        assert!(matches!(
            problem("prob prob\n").1,
            Problem::BadValue {
                what: "column header",
                ..
            }
        ));
        assert!(matches!(
            problem("loss-level 1.01\n").1,
            Problem::OutOfRange {
                what: "loss-level",
                ..
            }
        ));
        assert!(matches!(
            problem("loss-level nan\n").1,
            Problem::BadValue {
                what: "loss-level",
                ..
            }
        ));
        assert!(matches!(
            problem("prob delay\n0 inf\n").1,
            Problem::BadValue { what: "delay", .. }
        ));
        assert!(matches!(
            problem("bw lots\n").1,
            Problem::BadValue {
                what: "bandwidth",
                ..
            }
        ));
        // Comments anywhere, blank lines, CRLF, tabs, keywords in any case.
        let p =
            parse("# header\r\nNAME\tx # trailing\r\n\r\nProb Delay\r\n0 5#no space\r\n").unwrap();
        assert_eq!((p.name.as_str(), p.samples[0]), ("x", 5 * MS));
    }

    #[test]
    fn loss_follows_freebsd_index_rule() {
        let mut rng = Rng::new(0x5eed);
        let p = parse(EXAMPLE).unwrap();
        // loss-level 0.86 of 100 samples: indices 86..=99 are lost, 14 %.
        let n = 200_000;
        let mut lost = 0;
        for _ in 0..n {
            let (delay, l) = draw(&p, &mut rng);
            assert!(p.samples.contains(&delay));
            if l {
                lost += 1;
                // The lost are the slow tail of the distribution.
                assert!(delay >= 1150 * MS, "{delay}");
            }
        }
        // Binomial(200000, 0.14): σ ≈ 155; allow 5σ.
        let expected = n as f64 * 0.14;
        assert!(
            (f64::from(lost) - expected).abs() < 5.0 * 155.0,
            "lost {lost} of {n}"
        );

        let mut never = parse("prob delay\n0 1\n").unwrap();
        assert!(
            (0..10_000).all(|_| !draw(&never, &mut rng).1),
            "loss-level 1 loses nothing"
        );
        never.loss_level = 0.0;
        assert!(
            (0..10_000).all(|_| draw(&never, &mut rng).1),
            "loss-level 0 loses everything"
        );
        let empty = Profile {
            name: String::new(),
            bw: None,
            loss_level: 1.0,
            samples: Vec::new(),
        };
        assert_eq!(draw(&empty, &mut rng), (0, false));
    }

    #[test]
    fn same_seed_same_draws() {
        let p = parse(EXAMPLE).unwrap();
        let (mut a, mut b) = (Rng::new(9), Rng::new(9));
        for _ in 0..1000 {
            assert_eq!(draw(&p, &mut a), draw(&p, &mut b));
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_profile_like_text(
            lines in prop::collection::vec(
                prop_oneof![
                    "(name|bw|loss-level|samples|prob|delay|#)[ \t]{0,2}[-+.0-9a-zA-Z/]{0,8}",
                    "[-+.0-9]{0,6}[ \t]{1,2}[-+.0-9e]{0,6}",
                    Just("prob delay".to_string()),
                    Just("delay prob".to_string()),
                ],
                0..30,
            )
        ) {
            if let Ok(p) = parse(&lines.join("\n")) {
                prop_assert!(!p.samples.is_empty() && p.samples.len() <= MAX_SAMPLES);
                prop_assert!((0.0..=1.0).contains(&p.loss_level));
                prop_assert!(p.samples.windows(2).all(|w| w[0] <= w[1]));
                let mut rng = Rng::new(1);
                let _ = draw(&p, &mut rng);
            }
        }
    }
}
