//! Typical links, per direction: the table of seed 000 ("Bandwidth and
//! Delay for Different Types of Network").
//!
//! `up` is what the application sends (the uplink), `down` what it
//! receives. Each direction's queue holds one bandwidth-delay product of the
//! round trip (at least FreeBSD's 50 slots' worth), so a single TCP flow can
//! fill the link, as it would on the real network: a 50-slot queue would cap
//! a 50 Mbit/s, 115 ms path at a fraction of its rate.

/// One direction of a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Direction {
    /// bit/s.
    pub bw: u64,
    /// One-way delay, ms.
    pub delay_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub title: &'static str,
    pub down: Direction,
    pub up: Direction,
}

const fn dir(bw: u64, delay_ms: u64) -> Direction {
    Direction { bw, delay_ms }
}

const K: u64 = 1_000;
const M: u64 = 1_000_000;

pub static PRESETS: &[Preset] = &[
    Preset {
        name: "edge",
        title: "Edge",
        down: dir(240 * K, 400),
        up: dir(200 * K, 440),
    },
    Preset {
        name: "3g",
        title: "3G",
        down: dir(780 * K, 100),
        up: dir(330 * K, 100),
    },
    Preset {
        name: "lte",
        title: "LTE",
        down: dir(50 * M, 50),
        up: dir(10 * M, 65),
    },
    Preset {
        name: "dsl",
        title: "DSL",
        down: dir(2 * M, 10),
        up: dir(256 * K, 10),
    },
    Preset {
        name: "vdsl",
        title: "VDSL",
        down: dir(50 * M, 10),
        up: dir(10 * M, 10),
    },
    Preset {
        name: "geo-satellite",
        title: "Geo-Satellite",
        down: dir(10 * M, 325),
        up: dir(2 * M, 325),
    },
];

pub fn lookup(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

impl Preset {
    /// Round-trip propagation delay, ms.
    pub fn rtt_ms(&self) -> u64 {
        self.up.delay_ms + self.down.delay_ms
    }

    /// The pipe options for one direction, in ipfw syntax.
    pub fn pipe_options(&self, d: Direction) -> String {
        let bdp_bytes = d.bw / 8 * self.rtt_ms() / 1000;
        // At least 50 full-size packets, at most FreeBSD's 1 MB byte limit.
        let queue_kb = (bdp_bytes.max(50 * 1500) / 1000).min(1000);
        format!(
            "bw {} delay {}ms queue {}KBytes",
            format_bw(d.bw),
            d.delay_ms,
            queue_kb
        )
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

/// `dummynet presets`: the table, with the pipe options each direction gets.
pub fn table() -> String {
    let mut s = format!(
        "{:<14} {:>12} {:>10} {:>12} {:>10}   pipe options (up | down)\n",
        "name", "down", "down ms", "up", "up ms"
    );
    for p in PRESETS {
        s.push_str(&format!(
            "{:<14} {:>12} {:>10} {:>12} {:>10}   {} | {}\n",
            p.name,
            format_bw(p.down.bw),
            p.down.delay_ms,
            format_bw(p.up.bw),
            p.up.delay_ms,
            p.pipe_options(p.up),
            p.pipe_options(p.down)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(PRESETS.len(), 6);
        for p in PRESETS {
            for d in [p.up, p.down] {
                let line = format!("pipe 1 config {}", p.pipe_options(d));
                dummynet_lang::parse_command(&line)
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", p.name));
            }
        }
        assert!(lookup("carrier-pigeon").is_none());
    }
}
