//! Typical links, per direction: the typical-links table of the FreeBSD
//! dummynet article ("Bandwidth and Delay for Different Types of Network"),
//! the profiles browser and mobile test tools made familiar (Chrome
//! DevTools, WebPageTest, Apple's Network Link Conditioner), and a few
//! lossy, jittery and trace-driven links of our own.
//!
//! `up` is what the application sends (the uplink), `down` what it
//! receives. Delays are ONE-WAY, per direction: a tool that states a round
//! trip (DevTools, WebPageTest) has it split evenly, and each preset says
//! which its source gave ([`Preset::source_latency`]). Each direction's
//! queue holds one bandwidth-delay product of the round trip (at least
//! FreeBSD's 50 slots' worth), so a single TCP flow can fill the link, as it
//! would on the real network: a 50-slot queue would cap a 50 Mbit/s, 115 ms
//! path at a fraction of its rate.
//!
//! Trace presets use the mahimahi traces of `examples/traces/`, embedded in
//! the binary (`include_str!`) so an installed `dummynet` has them without
//! the source tree. Since `trace FILE` reads its file when the command is
//! parsed, a caller writes them out first ([`Preset::write_traces`]) and
//! names them there ([`Preset::pipe_options_in`]); [`Preset::pipe_options`]
//! names them bare, for a parse whose base directory is `examples/traces/`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A mahimahi trace shipped in `examples/traces/`.
#[derive(Debug, PartialEq, Eq)]
pub struct TraceFile {
    /// Its file name there.
    pub name: &'static str,
    pub text: &'static str,
}

pub static CELLULAR_WALK: TraceFile = TraceFile {
    name: "cellular-walk.trace",
    text: include_str!("../../../examples/traces/cellular-walk.trace"),
};
pub static CELLULAR_WALK_UP: TraceFile = TraceFile {
    name: "cellular-walk-up.trace",
    text: include_str!("../../../examples/traces/cellular-walk-up.trace"),
};
pub static CONSTANT_12MBIT: TraceFile = TraceFile {
    name: "constant-12mbit.trace",
    text: include_str!("../../../examples/traces/constant-12mbit.trace"),
};

/// netem's delay distributions, as `distribution NAME` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform on ±jitter (the default, so not written out).
    Uniform,
    /// Normal, with the jitter as its standard deviation.
    Normal,
    ParetoNormal,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::ParetoNormal => "paretonormal",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jitter {
    pub ms: u64,
    pub distribution: Distribution,
}

/// Probabilities are in hundredths of a percent (1 = 0.01 %, 10 000 = 100 %),
/// so the table stays exact and `const`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Each packet lost independently (FreeBSD's `plr`).
    Random(u32),
    /// Gilbert–Elliott (`loss gemodel P R 1-H 1-K`): good → bad with `p`,
    /// bad → good with `r`, loss `loss_bad` in the bad state and `loss_good`
    /// in the good one. On average a packet is lost with
    /// `(p·loss_bad + r·loss_good) / (p + r)`, in bursts of `1/r` packets
    /// when `loss_bad` is 100 %.
    GilbertElliott {
        p: u32,
        r: u32,
        loss_bad: u32,
        loss_good: u32,
    },
}

impl Loss {
    /// The long-run fraction of packets lost.
    pub fn mean(self) -> f64 {
        match self {
            Loss::Random(x) => f64::from(x) / 10_000.0,
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let (p, r) = (f64::from(p), f64::from(r));
                if p + r == 0.0 {
                    // Never leaves the good state.
                    return f64::from(loss_good) / 10_000.0;
                }
                (p * f64::from(loss_bad) + r * f64::from(loss_good)) / (p + r) / 10_000.0
            }
        }
    }

    /// The option words: `plr 0.1` for independent loss (FreeBSD's own word,
    /// the same draw as netem's `loss 10%`, and one every version of our
    /// language reads), `loss gemodel ...` for bursts.
    pub fn options(self) -> String {
        match self {
            Loss::Random(x) => format!("plr {}", decimal(x, 4)),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => format!(
                "loss gemodel {}% {}% {}% {}%",
                decimal(p, 2),
                decimal(r, 2),
                decimal(loss_bad, 2),
                decimal(loss_good, 2)
            ),
        }
    }
}

/// `v / 10^places` in decimal, trailing zeros dropped: `decimal(50, 4)` is
/// `0.005`.
fn decimal(v: u32, places: u32) -> String {
    let scale = 10u32.pow(places);
    let (whole, frac) = (v / scale, v % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:0width$}", width = places as usize);
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// One direction of a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Direction {
    /// bit/s; 0 is unlimited. With a trace, the trace's mean rate: shown and
    /// used to size the queue, never configured (`trace` replaces `bw`).
    pub bw: u64,
    /// One-way delay, ms.
    pub delay_ms: u64,
    pub jitter: Option<Jitter>,
    pub loss: Option<Loss>,
    pub trace: Option<&'static TraceFile>,
}

/// How a preset's source states latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// A round trip, split evenly between the directions here.
    RoundTrip,
    /// A delay per direction, taken as is.
    OneWay,
}

impl Latency {
    pub fn name(self) -> &'static str {
        match self {
            Latency::RoundTrip => "rtt",
            Latency::OneWay => "one-way",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub title: &'static str,
    /// Where the numbers come from.
    pub source: &'static str,
    pub source_latency: Latency,
    pub down: Direction,
    pub up: Direction,
}

const fn dir(bw: u64, delay_ms: u64) -> Direction {
    Direction {
        bw,
        delay_ms,
        jitter: None,
        loss: None,
        trace: None,
    }
}

const fn lossy(d: Direction, loss: Loss) -> Direction {
    Direction {
        loss: Some(loss),
        ..d
    }
}

const fn jittery(d: Direction, ms: u64, distribution: Distribution) -> Direction {
    Direction {
        jitter: Some(Jitter { ms, distribution }),
        ..d
    }
}

/// A traced direction; `mean_bw` must be the trace's mean rate (a test
/// checks it against the file).
const fn traced(t: &'static TraceFile, mean_bw: u64, delay_ms: u64) -> Direction {
    Direction {
        trace: Some(t),
        ..dir(mean_bw, delay_ms)
    }
}

/// A round trip of `rtt_ms` between two directions, as `(down, up)`.
const fn rtt(down_bw: u64, up_bw: u64, rtt_ms: u64) -> (Direction, Direction) {
    (dir(down_bw, rtt_ms / 2), dir(up_bw, rtt_ms - rtt_ms / 2))
}

const K: u64 = 1_000;
const M: u64 = 1_000_000;

/// The table of "Dummynet: The Better Way to Build FreeBSD Networks".
const TYPICAL: &str =
    "Bandwidth and Delay for Different Types of Network (the FreeBSD dummynet article's typical links)";
/// The presets of DevTools' Network panel, `front_end/core/sdk/NetworkManager.ts`
/// (ChromeDevTools/devtools-frontend, renamed and extended in 2024, crbug.com/342406608).
const DEVTOOLS: &str = "Chrome DevTools network throttling (NetworkManager.ts, 2024)";
/// WebPageTest's `www/settings/connectivity.ini.sample`
/// (WPO-Foundation/webpagetest); `latency` there is the round trip, as its
/// labels say (`"Cable (5/1 Mbps 28ms RTT)"`), `bwIn` the downlink.
const WPT: &str = "WebPageTest connectivity profiles (connectivity.ini.sample)";
/// The profiles of the Network Link Conditioner preference pane (Additional
/// Tools for Xcode). Apple publishes no table: the numbers are those the pane
/// shows for each built-in profile, a downlink and an uplink delay each.
const NLC: &str = "Apple Network Link Conditioner (Additional Tools for Xcode)";
const OURS: &str = "dummynet: illustrative values, not a measurement";

const DEVTOOLS_3G: (Direction, Direction) = rtt(500 * K, 500 * K, 400);
const DEVTOOLS_SLOW_4G: (Direction, Direction) = rtt(1_600 * K, 750 * K, 150);
const DEVTOOLS_FAST_4G: (Direction, Direction) = rtt(9 * M, 1_500 * K, 60);
const WPT_DIAL: (Direction, Direction) = rtt(49 * K, 30 * K, 120);
const WPT_DSL: (Direction, Direction) = rtt(1_500 * K, 384 * K, 50);
const WPT_CABLE: (Direction, Direction) = rtt(5 * M, M, 28);
const WPT_FIOS: (Direction, Direction) = rtt(20 * M, 5 * M, 4);
const WPT_2G: (Direction, Direction) = rtt(280 * K, 256 * K, 800);
const WPT_EDGE: (Direction, Direction) = rtt(240 * K, 200 * K, 840);
const WPT_3GSLOW: (Direction, Direction) = rtt(400 * K, 400 * K, 400);
const WPT_3G: (Direction, Direction) = rtt(1_600 * K, 768 * K, 300);
const WPT_3GFAST: (Direction, Direction) = rtt(1_600 * K, 768 * K, 150);
const WPT_4G: (Direction, Direction) = rtt(9 * M, 9 * M, 170);
const WPT_LTE: (Direction, Direction) = rtt(12 * M, 12 * M, 70);

/// Gilbert–Elliott bursts for `wifi-congested`: 1 % of packets start a bad
/// spell, 40 % end it, everything in it is lost: 1/(1+40) ≈ 2.4 % of packets
/// lost, in bursts of 2.5 on average, the clustering interference and
/// collisions give Wi-Fi losses.
const WIFI_BURSTS: Loss = Loss::GilbertElliott {
    p: 100,
    r: 4_000,
    loss_bad: 10_000,
    loss_good: 0,
};

pub static PRESETS: &[Preset] = &[
    // The typical-links table, unchanged; the demo uses `lte`.
    Preset {
        name: "edge",
        title: "Edge",
        source: TYPICAL,
        source_latency: Latency::OneWay,
        down: dir(240 * K, 400),
        up: dir(200 * K, 440),
    },
    Preset {
        name: "3g",
        title: "3G",
        source: TYPICAL,
        source_latency: Latency::OneWay,
        down: dir(780 * K, 100),
        up: dir(330 * K, 100),
    },
    Preset {
        name: "lte",
        title: "LTE",
        source: TYPICAL,
        source_latency: Latency::OneWay,
        down: dir(50 * M, 50),
        up: dir(10 * M, 65),
    },
    Preset {
        name: "dsl",
        title: "DSL",
        source: TYPICAL,
        source_latency: Latency::OneWay,
        down: dir(2 * M, 10),
        up: dir(256 * K, 10),
    },
    Preset {
        name: "vdsl",
        title: "VDSL",
        source: TYPICAL,
        source_latency: Latency::OneWay,
        down: dir(50 * M, 10),
        up: dir(10 * M, 10),
    },
    Preset {
        name: "geo-satellite",
        title: "Geo-Satellite",
        source: TYPICAL,
        source_latency: Latency::OneWay,
        down: dir(10 * M, 325),
        up: dir(2 * M, 325),
    },
    // Chrome DevTools. Its throttling acts per HTTP request, not per packet,
    // so DevTools scales its targets to imitate a packet-level link: latency
    // × 5, × 3.75 or × 2.75 and throughput × 0.8 or × 0.9 (Slow 4G sets
    // 562.5 ms and 1.44 Mbit/s). We are packet-level, so we use the targets
    // its source comments state: the round trip and the nominal rates.

    // DevTools "3G" (called "Slow 3G" before 2024): ~500 kbit/s each way,
    // 400 ms round trip (DevTools applies 2000 ms, 400 kbit/s).
    Preset {
        name: "devtools-3g",
        title: "Chrome DevTools 3G",
        source: DEVTOOLS,
        source_latency: Latency::RoundTrip,
        down: DEVTOOLS_3G.0,
        up: DEVTOOLS_3G.1,
    },
    // DevTools "Slow 4G" (called "Fast 3G" before 2024, and Lighthouse's
    // mobile throttling): ~1.6 Mbit/s down, ~750 kbit/s up, 150 ms round trip.
    Preset {
        name: "devtools-slow-4g",
        title: "Chrome DevTools Slow 4G",
        source: DEVTOOLS,
        source_latency: Latency::RoundTrip,
        down: DEVTOOLS_SLOW_4G.0,
        up: DEVTOOLS_SLOW_4G.1,
    },
    // DevTools "Fast 4G" (added 2024): 9 Mbit/s down, 1.5 Mbit/s up, 60 ms
    // round trip.
    Preset {
        name: "devtools-fast-4g",
        title: "Chrome DevTools Fast 4G",
        source: DEVTOOLS,
        source_latency: Latency::RoundTrip,
        down: DEVTOOLS_FAST_4G.0,
        up: DEVTOOLS_FAST_4G.1,
    },
    // WebPageTest: `bwIn`/`bwOut`, `latency` as a round trip, `plr` 0 in
    // every profile.

    // `[Dial]`: 56K dial-up, 49/30 kbit/s, 120 ms round trip.
    Preset {
        name: "wpt-dial",
        title: "WebPageTest 56K Dial-Up",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_DIAL.0,
        up: WPT_DIAL.1,
    },
    // `[DSL]`: 1.5 Mbit/s / 384 kbit/s, 50 ms round trip.
    Preset {
        name: "wpt-dsl",
        title: "WebPageTest DSL",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_DSL.0,
        up: WPT_DSL.1,
    },
    // `[Cable]`: 5/1 Mbit/s, 28 ms round trip.
    Preset {
        name: "wpt-cable",
        title: "WebPageTest Cable",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_CABLE.0,
        up: WPT_CABLE.1,
    },
    // `[FIOS]`: 20/5 Mbit/s, 4 ms round trip.
    Preset {
        name: "wpt-fios",
        title: "WebPageTest FIOS",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_FIOS.0,
        up: WPT_FIOS.1,
    },
    // `[2G]`: 280/256 kbit/s, 800 ms round trip.
    Preset {
        name: "wpt-2g",
        title: "WebPageTest 2G",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_2G.0,
        up: WPT_2G.1,
    },
    // `[Edge]`: 240/200 kbit/s, 840 ms round trip.
    Preset {
        name: "wpt-edge",
        title: "WebPageTest Mobile Edge",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_EDGE.0,
        up: WPT_EDGE.1,
    },
    // `[3GSlow]`: 400 kbit/s each way, 400 ms round trip (older samples had
    // 780/330 kbit/s and 200 ms under this name).
    Preset {
        name: "wpt-3gslow",
        title: "WebPageTest 3G Slow",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_3GSLOW.0,
        up: WPT_3GSLOW.1,
    },
    // `[3G]`: 1.6 Mbit/s / 768 kbit/s, 300 ms round trip.
    Preset {
        name: "wpt-3g",
        title: "WebPageTest 3G",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_3G.0,
        up: WPT_3G.1,
    },
    // `[3GFast]`: 1.6 Mbit/s / 768 kbit/s, 150 ms round trip.
    Preset {
        name: "wpt-3gfast",
        title: "WebPageTest 3G Fast",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_3GFAST.0,
        up: WPT_3GFAST.1,
    },
    // `[4G]`: 9 Mbit/s each way, 170 ms round trip.
    Preset {
        name: "wpt-4g",
        title: "WebPageTest 4G",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_4G.0,
        up: WPT_4G.1,
    },
    // `[LTE]`: 12 Mbit/s each way, 70 ms round trip.
    Preset {
        name: "wpt-lte",
        title: "WebPageTest LTE",
        source: WPT,
        source_latency: Latency::RoundTrip,
        down: WPT_LTE.0,
        up: WPT_LTE.1,
    },
    // Network Link Conditioner: a rate, a delay and a share of packets
    // dropped for each direction. ("High Latency DNS" delays only DNS
    // answers, which a pipe cannot single out, so it is left out.)

    // "3G": 780 kbit/s 100 ms down, 330 kbit/s 100 ms up (the typical-links table's 3G).
    Preset {
        name: "nlc-3g",
        title: "Network Link Conditioner 3G",
        source: NLC,
        source_latency: Latency::OneWay,
        down: dir(780 * K, 100),
        up: dir(330 * K, 100),
    },
    // "DSL": 2 Mbit/s 5 ms down, 256 kbit/s 5 ms up.
    Preset {
        name: "nlc-dsl",
        title: "Network Link Conditioner DSL",
        source: NLC,
        source_latency: Latency::OneWay,
        down: dir(2 * M, 5),
        up: dir(256 * K, 5),
    },
    // "Edge": 240 kbit/s 400 ms down, 200 kbit/s 440 ms up.
    Preset {
        name: "nlc-edge",
        title: "Network Link Conditioner Edge",
        source: NLC,
        source_latency: Latency::OneWay,
        down: dir(240 * K, 400),
        up: dir(200 * K, 440),
    },
    // "LTE": 50 Mbit/s 50 ms down, 10 Mbit/s 65 ms up.
    Preset {
        name: "nlc-lte",
        title: "Network Link Conditioner LTE",
        source: NLC,
        source_latency: Latency::OneWay,
        down: dir(50 * M, 50),
        up: dir(10 * M, 65),
    },
    // "Very Bad Network": 1 Mbit/s, 500 ms and 10 % of packets dropped,
    // each way.
    Preset {
        name: "nlc-very-bad",
        title: "Network Link Conditioner Very Bad Network",
        source: NLC,
        source_latency: Latency::OneWay,
        down: lossy(dir(M, 500), Loss::Random(1_000)),
        up: lossy(dir(M, 500), Loss::Random(1_000)),
    },
    // "100% Loss": every packet dropped, each way.
    Preset {
        name: "nlc-100-loss",
        title: "Network Link Conditioner 100% Loss",
        source: NLC,
        source_latency: Latency::OneWay,
        down: lossy(dir(0, 0), Loss::Random(10_000)),
        up: lossy(dir(0, 0), Loss::Random(10_000)),
    },
    // "Wi-Fi": 40 Mbit/s down, 33 Mbit/s up, 1 ms each way.
    Preset {
        name: "nlc-wifi",
        title: "Network Link Conditioner Wi-Fi",
        source: NLC,
        source_latency: Latency::OneWay,
        down: dir(40 * M, 1),
        up: dir(33 * M, 1),
    },
    // "Wi-Fi 802.11ac": 250 Mbit/s down, 100 Mbit/s up, 1 ms each way.
    Preset {
        name: "nlc-wifi-ac",
        title: "Network Link Conditioner Wi-Fi 802.11ac",
        source: NLC,
        source_latency: Latency::OneWay,
        down: dir(250 * M, 1),
        up: dir(100 * M, 1),
    },
    // Our own impaired links, to exercise what a clean table cannot.

    // The typical-links table's LTE with normally distributed jitter of 10 ms (standard
    // deviation) on each direction's delay.
    Preset {
        name: "lte-jittery",
        title: "LTE with jitter",
        source: OURS,
        source_latency: Latency::OneWay,
        down: jittery(dir(50 * M, 50), 10, Distribution::Normal),
        up: jittery(dir(10 * M, 65), 10, Distribution::Normal),
    },
    // A busy Wi-Fi cell: 20 Mbit/s down, 10 Mbit/s up, 20 ms each way with
    // 10 ms of heavy-tailed (pareto-normal) jitter from contention, and
    // bursty loss ([`WIFI_BURSTS`], ≈ 2.4 %).
    Preset {
        name: "wifi-congested",
        title: "Congested Wi-Fi",
        source: OURS,
        source_latency: Latency::OneWay,
        down: lossy(
            jittery(dir(20 * M, 20), 10, Distribution::ParetoNormal),
            WIFI_BURSTS,
        ),
        up: lossy(
            jittery(dir(10 * M, 20), 10, Distribution::ParetoNormal),
            WIFI_BURSTS,
        ),
    },
    // The typical-links table's geostationary satellite with 1 % independent loss and
    // 5 ms of normal jitter each way, as rain fade and a shared beam bring.
    Preset {
        name: "satellite-lossy",
        title: "Geo-Satellite, lossy",
        source: OURS,
        source_latency: Latency::OneWay,
        down: lossy(
            jittery(dir(10 * M, 325), 5, Distribution::Normal),
            Loss::Random(100),
        ),
        up: lossy(
            jittery(dir(2 * M, 325), 5, Distribution::Normal),
            Loss::Random(100),
        ),
    },
    // A cellular link whose rate wanders (examples/traces/cellular-walk*,
    // a random walk around 8 Mbit/s down and 2 Mbit/s up with a few
    // outages), with the typical-links table's LTE delays.
    Preset {
        name: "cellular-walk",
        title: "Cellular, varying rate (trace)",
        source: OURS,
        source_latency: Latency::OneWay,
        down: traced(&CELLULAR_WALK, CELLULAR_WALK_MEAN, 50),
        up: traced(&CELLULAR_WALK_UP, CELLULAR_WALK_UP_MEAN, 65),
    },
    // One 1504-byte opportunity per millisecond each way (12.032 Mbit/s),
    // 20 ms each way: the simplest trace, for comparing with `bw`.
    Preset {
        name: "constant-12mbit",
        title: "Constant 12 Mbit/s (trace)",
        source: OURS,
        source_latency: Latency::OneWay,
        down: traced(&CONSTANT_12MBIT, 12_032 * K, 20),
        up: traced(&CONSTANT_12MBIT, 12_032 * K, 20),
    },
];

/// The mean rates of the shipped cellular traces (checked by a test).
const CELLULAR_WALK_MEAN: u64 = 8_667_652;
const CELLULAR_WALK_UP_MEAN: u64 = 2_166_963;

pub fn lookup(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

impl Preset {
    /// Round-trip propagation delay, ms (jitter aside).
    pub fn rtt_ms(&self) -> u64 {
        self.up.delay_ms + self.down.delay_ms
    }

    /// The pipe options for one direction, in ipfw syntax; a trace is named
    /// by its bare file name, for a parse whose base directory holds it.
    pub fn pipe_options(&self, d: Direction) -> String {
        self.options(d, d.trace.map(|t| t.name.to_string()))
    }

    /// The pipe options for one direction, naming its trace (if any) in
    /// `trace_dir`, where [`Preset::write_traces`] puts it. Refused if the
    /// path is not UTF-8 or holds what the ipfw lexer splits on (blanks,
    /// braces, commas).
    pub fn pipe_options_in(&self, d: Direction, trace_dir: &Path) -> Result<String, PresetError> {
        let path = match d.trace {
            None => None,
            Some(t) => {
                let full = trace_dir.join(t.name);
                let s = full
                    .to_str()
                    .filter(|s| !s.contains(|c: char| c.is_whitespace() || "{},".contains(c)))
                    .ok_or_else(|| PresetError::TracePath(full.clone()))?;
                Some(s.to_string())
            }
        };
        Ok(self.options(d, path))
    }

    /// The pipe options of both directions, `(up, down)`, ready to parse:
    /// a traced direction's trace is first written under the system's
    /// temporary directory (`dummynet-traces/`), since `trace FILE` is read
    /// when the options are parsed.
    pub fn options_for_use(&self) -> Result<(String, String), PresetError> {
        let dir = std::env::temp_dir().join("dummynet-traces");
        self.write_traces(&dir)
            .map_err(|source| PresetError::Traces {
                preset: Some(self.name),
                dir: dir.clone(),
                source,
            })?;
        Ok((
            self.pipe_options_in(self.up, &dir)?,
            self.pipe_options_in(self.down, &dir)?,
        ))
    }

    /// Writes the traces this preset uses into `dir` (made if missing), each
    /// under its own name; a file already there with the same bytes is left
    /// alone, and a new one appears whole (written aside, then renamed), so
    /// concurrent shells never read half a trace.
    pub fn write_traces(&self, dir: &Path) -> std::io::Result<()> {
        for t in [self.up.trace, self.down.trace].into_iter().flatten() {
            std::fs::create_dir_all(dir)?;
            let path = dir.join(t.name);
            if std::fs::read(&path).is_ok_and(|b| b == t.text.as_bytes()) {
                continue;
            }
            let tmp = dir.join(format!(".{}.{}", t.name, std::process::id()));
            std::fs::write(&tmp, t.text)?;
            std::fs::rename(&tmp, &path)?;
        }
        Ok(())
    }

    fn options(&self, d: Direction, trace: Option<String>) -> String {
        let bdp_bytes = d.bw / 8 * self.rtt_ms() / 1000;
        // At least 50 full-size packets, at most FreeBSD's 1 MB byte limit.
        let queue_kb = (bdp_bytes.max(50 * 1500) / 1000).min(1000);
        let mut s = match (trace, d.bw) {
            (Some(path), _) => format!("trace {path} "),
            (None, 0) => String::new(),
            (None, bw) => format!("bw {} ", format_bw(bw)),
        };
        let _ = write!(s, "delay {}ms", d.delay_ms);
        if let Some(j) = d.jitter {
            let _ = write!(s, " jitter {}ms", j.ms);
            if j.distribution != Distribution::Uniform {
                let _ = write!(s, " distribution {}", j.distribution.name());
            }
        }
        let _ = write!(s, " queue {queue_kb}KBytes");
        if let Some(l) = d.loss {
            let _ = write!(s, " {}", l.options());
        }
        s
    }
}

/// A bandwidth in ipfw's own units.
pub fn format_bw(bw: u64) -> String {
    if bw.is_multiple_of(M) {
        format!("{}Mbit/s", bw / M)
    } else if bw.is_multiple_of(K) {
        format!("{}Kbit/s", bw / K)
    } else {
        format!("{bw}bit/s")
    }
}

/// A direction's rate for the table: unlimited, a rate, or a trace's mean.
fn rate_cell(d: Direction) -> String {
    match (d.trace, d.bw) {
        (Some(_), bw) => format!("~{:.1}Mbit/s", bw as f64 / 1e6),
        (None, 0) => "unlimited".into(),
        (None, bw) => format_bw(bw),
    }
}

fn loss_cell(d: Direction) -> String {
    match d.loss {
        None => "-".into(),
        Some(Loss::Random(x)) => format!("{}%", decimal(x, 2)),
        Some(l @ Loss::GilbertElliott { .. }) => format!("ge~{:.1}%", l.mean() * 100.0),
    }
}

fn jitter_cell(d: Direction) -> String {
    match d.jitter {
        None => "-".into(),
        Some(j) => format!("{}ms", j.ms),
    }
}

/// `dummynet presets [--json] [--traces DIR]`.
pub fn print(json_out: bool, trace_dir: Option<&Path>) -> ExitCode {
    let out = if json_out {
        json(trace_dir).map(|j| j + "\n")
    } else {
        table(trace_dir)
    };
    match out {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet presets: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A direction's options as the listing shows them: with `trace_dir`, the
/// preset's traces are written there first and named there.
fn listed_options(
    p: &Preset,
    d: Direction,
    trace_dir: Option<&Path>,
) -> Result<String, PresetError> {
    match trace_dir {
        None => Ok(p.pipe_options(d)),
        Some(dir) => {
            p.write_traces(dir).map_err(|source| PresetError::Traces {
                preset: None,
                dir: dir.to_path_buf(),
                source,
            })?;
            p.pipe_options_in(d, dir)
        }
    }
}

/// `dummynet presets`: the table, with the pipe options each direction gets.
pub fn table(trace_dir: Option<&Path>) -> Result<String, PresetError> {
    let mut s = format!(
        "{:<17} {:>12} {:>8} {:>12} {:>8} {:>15} {:>13} {:<23}   pipe options (up | down)\n",
        "name", "up", "up ms", "down", "down ms", "loss (u/d)", "jitter (u/d)", "trace (down)"
    );
    for p in PRESETS {
        let _ = writeln!(
            s,
            "{:<17} {:>12} {:>8} {:>12} {:>8} {:>15} {:>13} {:<23}   {} | {}",
            p.name,
            rate_cell(p.up),
            p.up.delay_ms,
            rate_cell(p.down),
            p.down.delay_ms,
            format!("{}/{}", loss_cell(p.up), loss_cell(p.down)),
            format!("{}/{}", jitter_cell(p.up), jitter_cell(p.down)),
            p.down.trace.map_or("-", |t| t.name),
            listed_options(p, p.up, trace_dir)?,
            listed_options(p, p.down, trace_dir)?
        );
    }
    Ok(s)
}

/// `dummynet presets --json`: every preset, for tools. Per direction: `bw`
/// in bit/s (0 = unlimited; with a trace, its mean rate, not configured),
/// `delay_ms` one way, `jitter_ms` and `jitter_distribution` (null without
/// jitter), `loss` (null, a fraction for independent loss, or the option
/// text of a model), `trace` (the file name under examples/traces/, or null)
/// and `options`, the ipfw pipe options (the trace named bare, or in
/// `trace_dir` after writing it there).
pub fn json(trace_dir: Option<&Path>) -> Result<String, PresetError> {
    let dir = |p: &Preset, d: Direction| -> Result<serde_json::Value, PresetError> {
        Ok(serde_json::json!({
            "bw": d.bw,
            "delay_ms": d.delay_ms,
            "jitter_ms": d.jitter.map(|j| j.ms),
            "jitter_distribution": d.jitter.map(|j| j.distribution.name()),
            "loss": match d.loss {
                None => serde_json::Value::Null,
                Some(l @ Loss::Random(_)) => serde_json::json!(l.mean()),
                Some(l) => serde_json::json!(l.options()),
            },
            "trace": d.trace.map(|t| t.name),
            "options": listed_options(p, d, trace_dir)?,
        }))
    };
    let all = PRESETS
        .iter()
        .map(|p| {
            Ok(serde_json::json!({
                "name": p.name,
                "title": p.title,
                "source": p.source,
                "source_latency": p.source_latency.name(),
                "rtt_ms": p.rtt_ms(),
                "down": dir(p, p.down)?,
                "up": dir(p, p.up)?,
            }))
        })
        .collect::<Result<Vec<_>, PresetError>>()?;
    Ok(serde_json::to_string_pretty(&all)?)
}

/// Why a preset's options or its listing could not be given.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    /// A trace's path the ipfw lexer would split (blanks, braces, commas)
    /// or that is not UTF-8.
    #[error("{}: a trace path cannot hold blanks, braces or commas", .0.display())]
    TracePath(PathBuf),
    /// The preset's traces could not be written where they are named.
    #[error("writing {}traces {} {}: {source}", preset_of(*preset), if preset.is_some() { "to" } else { "into" }, dir.display())]
    Traces {
        preset: Option<&'static str>,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// `preset `NAME`'s `, or nothing.
fn preset_of(name: Option<&str>) -> String {
    name.map_or(String::new(), |n| format!("preset `{n}`'s "))
}

#[cfg(test)]
mod tests {

    /// A trace path the lexer would split is refused as such, naming it.
    #[test]
    fn a_trace_path_with_blanks_is_a_kind() {
        let p = PRESETS.iter().find(|p| p.up.trace.is_some()).unwrap();
        let e = p.pipe_options_in(p.up, Path::new("/tmp/a b")).unwrap_err();
        assert!(matches!(&e, PresetError::TracePath(path) if path.starts_with("/tmp/a b")));
        assert!(
            e.to_string()
                .ends_with(": a trace path cannot hold blanks, braces or commas"),
            "{e}"
        );
    }
    use super::*;
    use dummynet_engine::impair::trace::{self, TraceMode};

    /// Whether the options use words of issue 11 (jitter, `loss gemodel`,
    /// `trace`) rather than FreeBSD's own.
    fn uses_netem_options(p: &Preset) -> bool {
        [p.up, p.down].iter().any(|d| {
            d.jitter.is_some()
                || d.trace.is_some()
                || matches!(d.loss, Some(Loss::GilbertElliott { .. }))
        })
    }

    #[test]
    fn the_seed_table_and_options_parse() {
        let lte = lookup("LTE").unwrap();
        assert_eq!(lte.down, dir(50 * M, 50));
        assert_eq!(lte.up, dir(10 * M, 65));
        assert_eq!(lte.rtt_ms(), 115);
        // 10 Mbit/s × 115 ms = 143,750 bytes.
        assert_eq!(
            lte.pipe_options(lte.up),
            "bw 10Mbit/s delay 65ms queue 143KBytes"
        );
        assert_eq!(
            lookup("edge")
                .unwrap()
                .pipe_options(lookup("edge").unwrap().up),
            "bw 200Kbit/s delay 440ms queue 75KBytes"
        );
        let seed: Vec<_> = PRESETS.iter().filter(|p| p.source == TYPICAL).collect();
        let names: Vec<_> = seed.iter().map(|p| p.name).collect();
        assert_eq!(names, ["edge", "3g", "lte", "dsl", "vdsl", "geo-satellite"]);
        assert_eq!(
            PRESETS[..6].iter().filter(|p| p.source == TYPICAL).count(),
            6
        );
        for p in seed {
            for d in [p.up, p.down] {
                assert_eq!((d.jitter, d.loss, d.trace), (None, None, None));
            }
        }
        for p in PRESETS.iter().filter(|p| !uses_netem_options(p)) {
            for d in [p.up, p.down] {
                let line = format!("pipe 1 config {}", p.pipe_options(d));
                dummynet_lang::parse_command(&line)
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", p.name));
            }
        }
        assert!(lookup("carrier-pigeon").is_none());
    }

    /// Presets with jitter, `loss gemodel` or a trace parse once the
    /// language reads issue 11's options.
    #[test]
    fn netem_presets_parse() {
        let dir = std::env::temp_dir().join(format!("dummynet-presets-{}", std::process::id()));
        for p in PRESETS.iter().filter(|p| uses_netem_options(p)) {
            p.write_traces(&dir).unwrap();
            for d in [p.up, p.down] {
                let line = format!("pipe 1 config {}", p.pipe_options_in(d, &dir).unwrap());
                dummynet_lang::parse_command(&line)
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", p.name));
                // The bare name reads against the shipped folder.
                let bare = format!("pipe 1 config {}", p.pipe_options(d));
                let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces");
                dummynet_lang::parse_args_in(
                    &bare
                        .split_whitespace()
                        .map(String::from)
                        .collect::<Vec<_>>(),
                    Some(&shipped),
                )
                .unwrap_or_else(|e| panic!("{}: {bare}: {e}", p.name));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn options_are_complete_and_names_unique() {
        let mut seen = std::collections::HashSet::new();
        for p in PRESETS {
            assert!(seen.insert(p.name.to_ascii_lowercase()), "{} twice", p.name);
            assert!(!p.title.is_empty() && !p.source.is_empty());
            for d in [p.up, p.down] {
                let o = p.pipe_options(d);
                assert!(o.contains(&format!("delay {}ms", d.delay_ms)), "{o}");
                assert!(o.contains("queue "), "{o}");
                // `bw` and `trace` exclude each other.
                assert!(!(o.contains("bw ") && o.contains("trace ")), "{o}");
                assert_eq!(o.contains("trace "), d.trace.is_some(), "{o}");
            }
        }
        assert!(PRESETS.len() >= 30);
    }

    #[test]
    fn impaired_options() {
        let o = |name: &str, up: bool| {
            let p = lookup(name).unwrap();
            p.pipe_options(if up { p.up } else { p.down })
        };
        assert_eq!(
            o("nlc-very-bad", true),
            "bw 1Mbit/s delay 500ms queue 125KBytes plr 0.1"
        );
        assert_eq!(o("nlc-100-loss", false), "delay 0ms queue 75KBytes plr 1");
        assert_eq!(
            o("lte-jittery", false),
            "bw 50Mbit/s delay 50ms jitter 10ms distribution normal queue 718KBytes"
        );
        assert_eq!(
            o("wifi-congested", true),
            "bw 10Mbit/s delay 20ms jitter 10ms distribution paretonormal queue 75KBytes \
             loss gemodel 1% 40% 100% 0%"
        );
        assert_eq!(
            o("satellite-lossy", false),
            "bw 10Mbit/s delay 325ms jitter 5ms distribution normal queue 812KBytes plr 0.01"
        );
        assert_eq!(
            o("constant-12mbit", true),
            "trace constant-12mbit.trace delay 20ms queue 75KBytes"
        );
        // Round trips are split: DevTools Slow 4G is 150 ms, WebPageTest's
        // cable 28 ms.
        let s4g = lookup("devtools-slow-4g").unwrap();
        assert_eq!((s4g.down.delay_ms, s4g.up.delay_ms), (75, 75));
        assert_eq!(s4g.source_latency, Latency::RoundTrip);
        assert_eq!(lookup("wpt-cable").unwrap().rtt_ms(), 28);
        assert!((WIFI_BURSTS.mean() - 1.0 / 41.0).abs() < 1e-12);
        assert_eq!(decimal(50, 4), "0.005");
        assert_eq!(decimal(10_000, 4), "1");
        assert_eq!(decimal(250, 2), "2.5");
    }

    #[test]
    fn trace_presets_match_their_files() {
        for t in [&CELLULAR_WALK, &CELLULAR_WALK_UP, &CONSTANT_12MBIT] {
            let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/traces")
                .join(t.name);
            assert_eq!(std::fs::read_to_string(shipped).unwrap(), t.text);
        }
        for p in PRESETS {
            for d in [p.up, p.down] {
                if let Some(t) = d.trace {
                    let parsed = trace::parse(t.name, t.text, TraceMode::Loop).unwrap();
                    assert_eq!(parsed.mean_rate(), d.bw, "{}: {}", p.name, t.name);
                }
            }
        }
    }

    #[test]
    fn traces_are_written_out_and_named() {
        let dir = std::env::temp_dir().join(format!("dummynet-traces-{}", std::process::id()));
        let p = lookup("cellular-walk").unwrap();
        p.write_traces(&dir).unwrap();
        // Twice: the second finds the files in place.
        p.write_traces(&dir).unwrap();
        for d in [p.up, p.down] {
            let t = d.trace.unwrap();
            let path = dir.join(t.name);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), t.text);
            let o = p.pipe_options_in(d, &dir).unwrap();
            assert!(
                o.starts_with(&format!("trace {} delay", path.display())),
                "{o}"
            );
        }
        // Presets without traces write nothing and name nothing.
        let lte = lookup("lte").unwrap();
        lte.write_traces(Path::new("/nonexistent/never")).unwrap();
        assert_eq!(
            lte.pipe_options_in(lte.up, Path::new("/x y")).unwrap(),
            lte.pipe_options(lte.up)
        );
        assert!(p.pipe_options_in(p.up, Path::new("/tmp/a b")).is_err());
        assert!(p.pipe_options_in(p.up, Path::new("/tmp/a,b")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn json_lists_every_preset() {
        let v: serde_json::Value = serde_json::from_str(&json(None).unwrap()).unwrap();
        let arr = v.as_array().unwrap();
        assert_eq!(arr.len(), PRESETS.len());
        for (j, p) in arr.iter().zip(PRESETS) {
            assert_eq!(j["name"], p.name);
            assert_eq!(j["source_latency"], p.source_latency.name());
            for (key, d) in [("up", p.up), ("down", p.down)] {
                assert_eq!(j[key]["options"], p.pipe_options(d));
                assert_eq!(j[key]["delay_ms"], d.delay_ms);
                assert_eq!(j[key]["bw"], d.bw);
            }
        }
        let vb = &arr[PRESETS
            .iter()
            .position(|p| p.name == "nlc-very-bad")
            .unwrap()];
        assert_eq!(vb["down"]["loss"], 0.1);
        assert_eq!(vb["down"]["jitter_ms"], serde_json::Value::Null);
        let wc = &arr[PRESETS
            .iter()
            .position(|p| p.name == "wifi-congested")
            .unwrap()];
        assert_eq!(wc["up"]["loss"], "loss gemodel 1% 40% 100% 0%");
        assert_eq!(wc["up"]["jitter_distribution"], "paretonormal");
        let cw = &arr[PRESETS
            .iter()
            .position(|p| p.name == "cellular-walk")
            .unwrap()];
        assert_eq!(cw["down"]["trace"], "cellular-walk.trace");
        assert_eq!(cw["up"]["trace"], "cellular-walk-up.trace");
        // Every row of the table too.
        assert_eq!(table(None).unwrap().lines().count(), PRESETS.len() + 1);
        // Up before down in every column, as in its options' `up | down`.
        let shown = table(None).unwrap();
        let header: Vec<&str> = shown.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(&header[1..5], ["up", "up", "ms", "down"], "{shown}");
        let lte = shown.lines().find(|l| l.starts_with("lte ")).unwrap();
        let cells: Vec<&str> = lte.split_whitespace().collect();
        assert_eq!(&cells[1..5], ["10Mbit/s", "65", "50Mbit/s", "50"], "{lte}");
        assert!(
            lte.contains("bw 10Mbit/s delay 65ms queue 143KBytes | bw 50Mbit/s"),
            "{lte}"
        );
        // With a trace folder, the traces land there and the options name them.
        let dir = std::env::temp_dir().join(format!("dummynet-json-{}", std::process::id()));
        let v: serde_json::Value = serde_json::from_str(&json(Some(&dir)).unwrap()).unwrap();
        let cw = &v[PRESETS
            .iter()
            .position(|p| p.name == "cellular-walk")
            .unwrap()];
        let path = dir.join("cellular-walk.trace");
        assert_eq!(
            cw["down"]["options"],
            // 8.67 Mbit/s × 115 ms = 124,597 bytes.
            format!("trace {} delay 50ms queue 124KBytes", path.display())
        );
        assert!(path.exists() && dir.join("constant-12mbit.trace").exists());
        assert!(table(Some(&dir))
            .unwrap()
            .contains(&path.display().to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
