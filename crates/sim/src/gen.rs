//! `dummynet gen`: synthetic constant-rate traffic as a pcap, for examples
//! and tests.
//!
//! Packet `i` is stamped `start + floor(i * size * 8 / rate)` seconds, computed
//! exactly in integers, so the rate never drifts and a given command line
//! always writes the same bytes. Flows take turns (packet `i` belongs to flow
//! `i mod flows`); flow `k` has the `k`-th host of `--src` as source address
//! and source port `10000 + k`.
//!
//! Every packet has the same length, so the file's size is known before a
//! byte is written ([`Plan::file_size`]): `gen` states it, and refuses to
//! start a file that the free space of its filesystem cannot hold.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dummynet_engine::time::NS_PER_SEC;
use dummynet_engine::Nanos;
use etherparse::{IpHeaders, PacketBuilder, PacketBuilderStep};

use dummynet_dataplane::capture;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    Udp,
    Tcp,
    Icmp,
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// The pcap file to write (nanosecond timestamps). Its size is stated
    /// before writing, and a file larger than the free space of its
    /// filesystem is refused before it is created.
    #[arg(long, value_name = "FILE.pcap")]
    pub out: PathBuf,
    /// Sending rate, counting IP bytes: bit/s, Kbit/s, Mbit/s, Gbit/s, or Byte/s, KByte/s...
    #[arg(long, default_value = "10Mbit/s", value_parser = parse_rate)]
    pub rate: u64,
    /// IP packet length in bytes (what dummynet bills; Ethernet adds 14).
    #[arg(long, default_value_t = 1500)]
    pub size: u32,
    /// How long to send, e.g. 1s, 250ms (a bare number is seconds). Default 1s.
    #[arg(long, value_parser = parse_duration, conflicts_with = "packets")]
    pub duration: Option<Nanos>,
    /// How many packets to send, instead of --duration.
    #[arg(long)]
    pub packets: Option<u64>,
    /// Number of flows, sent round-robin.
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,
    /// Source network; flows take its hosts in turn [default: 10.0.0.0/24, or 2001:db8::/64 with --ipv6].
    #[arg(long, value_name = "ADDR[/LEN]")]
    pub src: Option<String>,
    /// Destination address [default: 10.0.1.1, or 2001:db8:1::1 with --ipv6].
    #[arg(long, value_name = "ADDR")]
    pub dst: Option<IpAddr>,
    /// Capture timestamp of the first packet (a bare number is seconds since the epoch).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub start: Nanos,
    /// Write raw IP (LINKTYPE_RAW) instead of Ethernet.
    #[arg(long)]
    pub raw: bool,
    /// IPv6 instead of IPv4.
    #[arg(long)]
    pub ipv6: bool,
}

pub fn run(args: GenArgs) -> ExitCode {
    match write(&args) {
        Ok(n) => {
            eprintln!("dummynet gen: wrote {n} packets to {}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet gen: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why `gen` cannot write its capture.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error(transparent)]
    Net(#[from] NetError),
    #[error(
        "--src {src} and --dst {dst} must both be IPv{} addresses{}",
        if *.ipv6 { 6 } else { 4 },
        if *.ipv6 { "" } else { " (or pass --ipv6)" }
    )]
    Versions {
        src: IpAddr,
        dst: IpAddr,
        ipv6: bool,
    },
    #[error("--rate must be above 0")]
    ZeroRate,
    #[error("--flows must be 1..={max}")]
    Flows { max: u16 },
    #[error("--size {size} is outside {min}..={max} for {proto:?} over IPv{}", if *.ipv6 { 6 } else { 4 })]
    Size {
        size: u32,
        min: u32,
        max: u32,
        proto: Proto,
        ipv6: bool,
    },
    #[error("timestamps overflow: lower --start or --duration")]
    TimestampOverflow,
    #[error("cannot write {}: it is not a regular file", path.display())]
    NotRegular { path: PathBuf },
    #[error("cannot create {}: reading the free space of {}: {source}", path.display(), dir.display())]
    FreeSpace {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error(
        "{} would take {} ({size} bytes) but its filesystem has {} ({room} bytes) free; \
         write fewer packets (--packets, --duration, --rate, --size) or elsewhere",
        path.display(),
        human_bytes(*size),
        human_bytes(*room)
    )]
    NoRoom {
        path: PathBuf,
        size: u128,
        room: u128,
    },
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Capture(#[from] capture::CaptureError),
    #[error("source and destination are of different IP versions")]
    MixedVersions,
    #[error("building packet {packet}: {source}")]
    Build {
        packet: u64,
        #[source]
        source: etherparse::err::packet::BuildWriteError,
    },
}

/// A `--src` network that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error("--src `{input}`: `{addr}` is not an IP address")]
    NotAddress { input: String, addr: String },
    #[error("--src `{input}`: prefix length must be 0..={max}")]
    PrefixLength { input: String, max: u8 },
}

/// A rate or a time that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("`{input}`: unknown unit `{unit}` (use bit/s, Kbit/s, Mbit/s, Gbit/s, Byte/s...)")]
    RateUnit { input: String, unit: String },
    #[error("`{input}`: not a rate (e.g. 10Mbit/s)")]
    NotRate { input: String },
    #[error("`{input}`: unknown unit `{unit}` (use s, ms, us or ns)")]
    TimeUnit { input: String, unit: String },
    #[error("`{input}`: not a time (e.g. 1s, 250ms)")]
    NotTime { input: String },
}

fn write(args: &GenArgs) -> Result<u64, GenError> {
    let plan = Plan::new(args)?;
    let packets = plan.packets();
    if let Some(last) = packets.checked_sub(1) {
        plan.timestamp(last)?;
    }
    let size = plan.file_size();
    check_room(&args.out, size, room_for(&args.out)?)?;
    eprintln!(
        "dummynet gen: writing {packets} packets, {} ({size} bytes) to {}",
        human_bytes(size),
        args.out.display()
    );
    let file = File::create(&args.out).map_err(|source| GenError::Create {
        path: args.out.clone(),
        source,
    })?;
    let mut w = capture::Writer::new(
        BufWriter::new(file),
        if args.raw {
            LINKTYPE_RAW
        } else {
            LINKTYPE_ETHERNET
        },
    )?;
    let mut n = 0;
    plan.each(|ts, frame| {
        n += 1;
        Ok(w.write(ts, frame.len() as u32, frame)?)
    })?;
    w.into_inner().flush().map_err(|source| GenError::Write {
        path: args.out.clone(),
        source,
    })?;
    Ok(n)
}

/// The free space of the filesystem that is to hold `path` (statvfs's
/// `f_bavail`: what is left to unprivileged writers), plus what `path`
/// takes now if it is a regular file, which is truncated first. `None`
/// when `path` is not a regular file (`/dev/null`, a pipe), which takes
/// what it is given.
fn room_for(path: &Path) -> Result<Option<u128>, GenError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let existing = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m.blocks().saturating_mul(512),
        Ok(m) if m.file_type().is_char_device() || m.file_type().is_fifo() => return Ok(None),
        Ok(_) => {
            return Err(GenError::NotRegular {
                path: path.to_path_buf(),
            })
        }
        Err(_) => 0,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fs = nix::sys::statvfs::statvfs(dir).map_err(|source| GenError::FreeSpace {
        path: path.to_path_buf(),
        dir: dir.to_path_buf(),
        source,
    })?;
    let free = u128::from(fs.blocks_available()) * u128::from(fs.fragment_size());
    Ok(Some(free + u128::from(existing)))
}

/// Refuses a file of `size` bytes at `path` when more than `room` (see
/// [`room_for`]; `None`: no limit).
fn check_room(path: &Path, size: u128, room: Option<u128>) -> Result<(), GenError> {
    match room {
        Some(room) if size > room => Err(GenError::NoRoom {
            path: path.to_path_buf(),
            size,
            room,
        }),
        _ => Ok(()),
    }
}

/// `1.3 MB`: decimal units, as disk sizes are sold and `df -H` shows them.
fn human_bytes(n: u128) -> String {
    const UNITS: [(u128, &str); 4] = [
        (1_000_000_000_000, "TB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "kB"),
    ];
    match UNITS.iter().find(|(scale, _)| n >= *scale) {
        Some((scale, unit)) => format!("{:.1} {unit}", n as f64 / *scale as f64),
        None => format!("{n} bytes"),
    }
}

/// Bytes of a pcap file's header and of each packet record's header.
const PCAP_FILE_HEADER: u128 = 24;
const PCAP_RECORD_HEADER: u128 = 16;
/// Bytes of the Ethernet header before each IP packet (none with --raw).
const ETHERNET_HEADER: u32 = 14;

const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW: u32 = 101;
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const BASE_SPORT: u16 = 10_000;
/// iperf's port, so the traffic reads as a bulk transfer in a dissector.
const DPORT: u16 = 5001;

/// A validated generator command line.
pub struct Plan {
    rate: u64,
    size: u32,
    end: End,
    flows: u32,
    proto: Proto,
    src: (IpAddr, u8),
    dst: IpAddr,
    start: Nanos,
    raw: bool,
}

enum End {
    Packets(u64),
    Duration(Nanos),
}

impl Plan {
    pub fn new(a: &GenArgs) -> Result<Plan, GenError> {
        let src = match &a.src {
            Some(s) => parse_net(s)?,
            None if a.ipv6 => (IpAddr::V6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0].into()), 64),
            None => (IpAddr::V4([10, 0, 0, 0].into()), 24),
        };
        let dst = a.dst.unwrap_or(if a.ipv6 {
            IpAddr::V6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 1].into())
        } else {
            IpAddr::V4([10, 0, 1, 1].into())
        });
        if src.0.is_ipv6() != a.ipv6 || dst.is_ipv6() != a.ipv6 {
            return Err(GenError::Versions {
                src: src.0,
                dst,
                ipv6: a.ipv6,
            });
        }
        if a.rate == 0 {
            return Err(GenError::ZeroRate);
        }
        if a.flows == 0 || a.flows > u32::from(u16::MAX - BASE_SPORT) {
            return Err(GenError::Flows {
                max: u16::MAX - BASE_SPORT,
            });
        }
        let min = ip_header(a.ipv6) + l4_header(a.proto);
        let max = if a.ipv6 { 40 + 65535 } else { 65535 };
        if a.size < min || a.size > max {
            return Err(GenError::Size {
                size: a.size,
                min,
                max,
                proto: a.proto,
                ipv6: a.ipv6,
            });
        }
        let end = match (a.packets, a.duration) {
            (Some(n), _) => End::Packets(n),
            (None, Some(d)) => End::Duration(d),
            (None, None) => End::Duration(NS_PER_SEC),
        };
        Ok(Plan {
            rate: a.rate,
            size: a.size,
            end,
            flows: a.flows,
            proto: a.proto,
            src,
            dst,
            start: a.start,
            raw: a.raw,
        })
    }

    /// How many packets [`Plan::each`] gives. Packet `i` is at offset
    /// `floor(i * bits * 1e9 / rate)` ns, which is below `limit` exactly
    /// when `i * bits * 1e9 < limit * rate`: the first `ceil(limit * rate /
    /// (bits * 1e9))` packets are. The limit is the duration, or for
    /// `--packets` 2^64 ns, past which an offset does not fit.
    pub fn packets(&self) -> u64 {
        let before = |limit: u128| {
            let bits = u128::from(self.size) * 8 * u128::from(NS_PER_SEC);
            limit.saturating_mul(u128::from(self.rate)).div_ceil(bits)
        };
        let n = match self.end {
            End::Packets(n) => before(1 << 64).min(u128::from(n)),
            End::Duration(d) => before(u128::from(d)),
        };
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// Bytes of every frame written: the IP packet, after an Ethernet
    /// header unless --raw.
    fn frame_len(&self) -> u32 {
        if self.raw {
            self.size
        } else {
            self.size + ETHERNET_HEADER
        }
    }

    /// Bytes of the file [`write`] makes: the pcap header, then for every
    /// packet a record header and the frame (never cut: a frame is at
    /// most 64 KiB and change, the snap length 256 KiB).
    pub fn file_size(&self) -> u128 {
        let record = PCAP_RECORD_HEADER + u128::from(self.frame_len());
        PCAP_FILE_HEADER + u128::from(self.packets()) * record
    }

    /// Capture timestamp of packet `i` (which must be one the plan has).
    fn timestamp(&self, i: u64) -> Result<Nanos, GenError> {
        self.offset(i)
            .and_then(|off| self.start.checked_add(off))
            .ok_or(GenError::TimestampOverflow)
    }

    /// Offset of packet `i` from the start, or `None` once past the end.
    fn offset(&self, i: u64) -> Option<Nanos> {
        let bits = u128::from(i) * u128::from(self.size) * 8;
        let off = u64::try_from(bits * u128::from(NS_PER_SEC) / u128::from(self.rate)).ok()?;
        match self.end {
            End::Packets(n) => (i < n).then_some(off),
            End::Duration(d) => (off < d).then_some(off),
        }
    }

    /// Calls `emit(timestamp, frame)` for every packet, in order.
    pub fn each(
        &self,
        mut emit: impl FnMut(Nanos, &[u8]) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let mut frame = Vec::new();
        let mut i = 0u64;
        while let Some(off) = self.offset(i) {
            let ts = self
                .start
                .checked_add(off)
                .ok_or(GenError::TimestampOverflow)?;
            frame.clear();
            self.build(i, &mut frame)?;
            emit(ts, &frame)?;
            i += 1;
        }
        Ok(())
    }

    fn build(&self, i: u64, frame: &mut Vec<u8>) -> Result<(), GenError> {
        let flow = (i % u64::from(self.flows)) as u32;
        // Per-flow sequence number: TCP bytes sent or the ICMP echo sequence.
        let nth = i / u64::from(self.flows);
        let src = host(self.src, flow);
        let ip: PacketBuilderStep<IpHeaders> = match (src, self.dst, self.raw) {
            (IpAddr::V4(s), IpAddr::V4(d), false) => {
                PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv4(s.octets(), d.octets(), 64)
            }
            (IpAddr::V4(s), IpAddr::V4(d), true) => PacketBuilder::ipv4(s.octets(), d.octets(), 64),
            (IpAddr::V6(s), IpAddr::V6(d), false) => {
                PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv6(s.octets(), d.octets(), 64)
            }
            (IpAddr::V6(s), IpAddr::V6(d), true) => PacketBuilder::ipv6(s.octets(), d.octets(), 64),
            _ => return Err(GenError::MixedVersions),
        };
        let v6 = src.is_ipv6();
        let mut payload = vec![0u8; (self.size - ip_header(v6) - l4_header(self.proto)) as usize];
        // The packet's index, so a dissector shows which one it is.
        let tag = i.to_be_bytes();
        let n = payload.len().min(tag.len());
        payload[..n].copy_from_slice(&tag[..n]);
        let sport = BASE_SPORT + flow as u16;
        let written = match self.proto {
            Proto::Udp => ip.udp(sport, DPORT).write(frame, &payload),
            Proto::Tcp => {
                let seq = (nth.wrapping_mul(payload.len() as u64)) as u32;
                ip.tcp(sport, DPORT, seq, 65535)
                    .ack(1)
                    .psh()
                    .write(frame, &payload)
            }
            Proto::Icmp if v6 => ip
                .icmpv6_echo_request(flow as u16, nth as u16)
                .write(frame, &payload),
            Proto::Icmp => ip
                .icmpv4_echo_request(flow as u16, nth as u16)
                .write(frame, &payload),
        };
        written.map_err(|source| GenError::Build { packet: i, source })
    }
}

fn ip_header(v6: bool) -> u32 {
    if v6 {
        40
    } else {
        20
    }
}

fn l4_header(p: Proto) -> u32 {
    match p {
        Proto::Udp | Proto::Icmp => 8,
        Proto::Tcp => 20,
    }
}

/// The `k`-th host of a network, wrapping around. The network and broadcast
/// addresses of an IPv4 network are skipped, as a real sender would not use them.
fn host((net, len): (IpAddr, u8), k: u32) -> IpAddr {
    let k = u128::from(k);
    match net {
        IpAddr::V4(a) => {
            let span = 1u128 << (32 - u32::from(len));
            let (first, count) = if span > 2 { (1, span - 2) } else { (0, span) };
            let base = u128::from(u32::from(a)) & !(span - 1);
            IpAddr::V4(((base + first + k % count) as u32).into())
        }
        IpAddr::V6(a) => {
            let span = 1u128.checked_shl(128 - u32::from(len)).unwrap_or(0);
            let base = if span == 0 {
                0
            } else {
                u128::from(a) & !(span - 1)
            };
            // Skip the all-zero subnet-router anycast address.
            let (first, count) = match span {
                0 => (1, u128::MAX),
                1 => (0, 1),
                s => (1, s - 1),
            };
            IpAddr::V6((base + first + k % count).into())
        }
    }
}

/// `ADDR` or `ADDR/LEN`.
pub fn parse_net(s: &str) -> Result<(IpAddr, u8), NetError> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| NetError::NotAddress {
        input: s.to_string(),
        addr: addr.to_string(),
    })?;
    let max = if addr.is_ipv6() { 128 } else { 32 };
    let len =
        match len {
            None => max,
            Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| {
                NetError::PrefixLength {
                    input: s.to_string(),
                    max,
                }
            })?,
        };
    Ok((addr, len))
}

/// Splits `12.5Mbit/s` into `("12.5", "Mbit/s")`.
fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s.split_at(end)
}

/// `int.frac * mult / div` exactly, in integers; `None` on overflow or bad digits.
fn scaled(number: &str, mult: u128, div: u128) -> Option<u64> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 18 {
        return None;
    }
    let digits = |d: &str| {
        if d.is_empty() {
            Some(0)
        } else {
            d.parse::<u128>().ok()
        }
    };
    let scale = 10u128.pow(frac.len() as u32);
    let v = digits(int)?
        .checked_mul(scale)?
        .checked_add(digits(frac)?)?;
    u64::try_from(v.checked_mul(mult)? / (scale * div)).ok()
}

/// A rate in bits per second, in ipfw's units: `10Mbit/s`, `300Kbit/s`,
/// `1Gbit/s`, `2MByte/s`, or a bare number of bit/s.
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(s.trim());
    let (prefix, rest) = match unit.chars().next() {
        Some('K' | 'k') => (1_000u128, &unit[1..]),
        Some('M' | 'm') => (1_000_000, &unit[1..]),
        Some('G' | 'g') => (1_000_000_000, &unit[1..]),
        _ => (1, unit),
    };
    let per_unit = match rest {
        "" | "bit/s" | "bps" | "b/s" | "bit" => 1,
        "Byte/s" | "Bytes/s" | "B/s" | "Bps" | "byte/s" | "bytes/s" => 8,
        _ => {
            return Err(UnitError::RateUnit {
                input: s.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    scaled(num, prefix * per_unit, 1).ok_or_else(|| UnitError::NotRate {
        input: s.to_string(),
    })
}

/// A time in nanoseconds: `1s`, `250ms`, `20us`, `100ns`, `1.5s`, or a bare
/// number of seconds.
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    let (num, unit) = split_number(s.trim());
    let mult: u128 = match unit {
        "" | "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" | "µs" => 1_000,
        "ns" => 1,
        _ => {
            return Err(UnitError::TimeUnit {
                input: s.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    scaled(num, mult, 1).ok_or_else(|| UnitError::NotTime {
        input: s.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dummynet_engine::wire::{self, LinkType};

    fn args(extra: &[&str]) -> GenArgs {
        args_to("x.pcap", extra)
    }

    fn args_to(out: &str, extra: &[&str]) -> GenArgs {
        use clap::{Args, FromArgMatches};
        let cmd = GenArgs::augment_args(clap::Command::new("gen"));
        let m = cmd
            .try_get_matches_from(["gen", "--out", out].iter().chain(extra))
            .unwrap();
        GenArgs::from_arg_matches(&m).unwrap()
    }

    fn frames(a: &GenArgs) -> Vec<(Nanos, Vec<u8>)> {
        let mut v = Vec::new();
        Plan::new(a)
            .unwrap()
            .each(|t, f| {
                v.push((t, f.to_vec()));
                Ok(())
            })
            .unwrap();
        v
    }

    #[test]
    fn units() {
        assert_eq!(parse_rate("10Mbit/s"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5Mbit/s"), Ok(1_500_000));
        assert_eq!(parse_rate("300Kbit/s"), Ok(300_000));
        assert_eq!(parse_rate("1Gbit/s"), Ok(1_000_000_000));
        assert_eq!(parse_rate("2MByte/s"), Ok(16_000_000));
        assert_eq!(parse_rate("64000"), Ok(64_000));
        assert!(parse_rate("10Mfurlongs").is_err());
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_duration("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration("0.5"), Ok(500_000_000));
        assert_eq!(parse_duration("7ns"), Ok(7));
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration(".").is_err());
        assert!(parse_duration("99999999999999999999999999s").is_err());
    }

    #[test]
    fn constant_rate_exact_timestamps() {
        // 1500 bytes at 10 Mbit/s: one packet every 1.2 ms.
        let f = frames(&args(&["--packets", "4", "--start", "5"]));
        let ts: Vec<_> = f.iter().map(|(t, _)| *t).collect();
        assert_eq!(
            ts,
            [5_000_000_000, 5_001_200_000, 5_002_400_000, 5_003_600_000]
        );
        assert!(f.iter().all(|(_, d)| d.len() == 1514));
        // 1 s at that rate: offsets 0, 1.2 ms, ... below 1 s.
        assert_eq!(frames(&args(&[])).len(), 834);
        assert_eq!(frames(&args(&["--duration", "12ms"])).len(), 10);
    }

    #[test]
    fn flows_round_robin_and_parse_back() {
        let f = frames(&args(&[
            "--packets",
            "6",
            "--flows",
            "3",
            "--size",
            "100",
            "--proto",
            "tcp",
        ]));
        let keys: Vec<_> = f
            .iter()
            .map(|(_, d)| wire::parse(LinkType::Ethernet, d).unwrap())
            .collect();
        assert!(keys
            .iter()
            .all(|p| p.len == 100 && p.key.proto == 6 && p.key.dport == DPORT));
        let srcs: Vec<_> = keys
            .iter()
            .map(|p| (p.key.src_ip().to_string(), p.key.sport))
            .collect();
        assert_eq!(srcs[0], ("10.0.0.1".to_string(), 10000));
        assert_eq!(srcs[1], ("10.0.0.2".to_string(), 10001));
        assert_eq!(srcs[2], ("10.0.0.3".to_string(), 10002));
        assert_eq!(srcs[3], srcs[0]);
    }

    #[test]
    fn raw_ipv6_and_icmp() {
        let f = frames(&args(&[
            "--packets",
            "2",
            "--ipv6",
            "--raw",
            "--proto",
            "icmp",
            "--size",
            "100",
        ]));
        let p = wire::parse(LinkType::RawIp, &f[0].1).unwrap();
        assert!(p.key.v6);
        assert_eq!(
            (p.len, p.key.proto, p.key.dst_ip().to_string()),
            (100, 58, "2001:db8:1::1".to_string())
        );
        assert_eq!(p.key.src_ip().to_string(), "2001:db8::1");
    }

    #[test]
    fn bad_arguments() {
        assert!(Plan::new(&args(&["--size", "20"])).is_err());
        assert!(Plan::new(&args(&["--ipv6", "--dst", "10.0.0.1"])).is_err());
        assert!(Plan::new(&args(&["--flows", "0"])).is_err());
        assert!(Plan::new(&args(&["--rate", "0"])).is_err());
        assert!(parse_net("10.0.0.0/33").is_err());
        assert!(parse_net("ten").is_err());
    }

    /// A scratch directory for written files, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("dn-gen-{}-{test}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The size stated before writing is the size written, to the byte.
    #[test]
    fn the_stated_size_is_the_size_written() {
        let dir = Scratch::new("size");
        let cases: [&[&str]; 6] = [
            &["--packets", "5"],
            &["--duration", "12ms"],
            &["--packets", "0"],
            &["--duration", "0"],
            &[
                "--raw",
                "--ipv6",
                "--proto",
                "icmp",
                "--size",
                "100",
                "--rate",
                "1Mbit/s",
                "--duration",
                "7ms",
            ],
            &[
                "--proto",
                "tcp",
                "--size",
                "64000",
                "--flows",
                "3",
                "--duration",
                "1ms",
                "--rate",
                "1Gbit/s",
            ],
        ];
        for (k, extra) in cases.iter().enumerate() {
            let out = dir.0.join(format!("{k}.pcap"));
            let a = args_to(out.to_str().unwrap(), extra);
            let plan = Plan::new(&a).unwrap();
            let written = write(&a).unwrap();
            assert_eq!(written, plan.packets(), "{extra:?}");
            let len = std::fs::metadata(&out).unwrap().len();
            assert_eq!(u128::from(len), plan.file_size(), "{extra:?}");
        }
    }

    /// The count is worked out, not counted: it matches what `each` gives
    /// for durations on and around a packet's offset.
    #[test]
    fn the_packet_count_is_exact_on_the_boundaries() {
        // 1500 bytes at 10 Mbit/s: offsets 1.2 ms apart.
        for (duration, want) in [
            ("0", 0),
            ("1ns", 1),
            ("1200us", 1),
            ("1200001ns", 2),
            ("12ms", 10),
            ("1s", 834),
        ] {
            let p = Plan::new(&args(&["--duration", duration])).unwrap();
            assert_eq!(p.packets(), want, "{duration}");
            assert_eq!(frames(&args(&["--duration", duration])).len() as u64, want);
        }
        // Offsets that do not divide evenly: 100 bytes at 3 kbit/s.
        for ms in [0u64, 1, 266, 267, 268, 533, 534, 1000] {
            let a = args(&[
                "--size",
                "100",
                "--rate",
                "3000",
                "--duration",
                &format!("{ms}ms"),
            ]);
            let p = Plan::new(&a).unwrap();
            assert_eq!(p.packets(), frames(&a).len() as u64, "{ms} ms");
        }
        let p = Plan::new(&args(&["--packets", "7", "--raw"])).unwrap();
        assert_eq!(p.file_size(), 24 + 7 * (16 + 1500));
    }

    /// A file larger than the room left is refused, before it is created,
    /// with the sizes in the message; no room to speak of (a device) is no
    /// limit.
    #[test]
    fn a_file_larger_than_the_free_space_is_refused() {
        let path = Path::new("/data/out.pcap");
        assert!(check_room(path, 1_000, Some(1_000)).is_ok());
        assert!(check_room(path, 5_000_000_000, None).is_ok());
        let e = check_room(path, 1_276_044, Some(1_000_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/data/out.pcap would take 1.3 MB (1276044 bytes)"),
            "{e}"
        );
        assert!(e.contains("1.0 MB (1000000 bytes) free"), "{e}");
        assert_eq!(human_bytes(999), "999 bytes");
        assert_eq!(human_bytes(2_500_000_000), "2.5 GB");
        // The real thing: more than any filesystem here has.
        let dir = Scratch::new("room");
        let out = dir.0.join("huge.pcap");
        let room = room_for(&out).unwrap().expect("a directory has free space");
        assert!(check_room(&out, room + 1, Some(room)).is_err());
        // As many packets as offsets fit in 64 bits: about 23 PB.
        let huge = args_to(
            out.to_str().unwrap(),
            &["--packets", "18446744073709551615"],
        );
        let e = write(&huge).unwrap_err().to_string();
        assert!(e.contains("free; write fewer packets"), "{e}");
        assert!(!out.exists(), "the refused file was created");
        // /dev/null takes anything.
        assert_eq!(room_for(Path::new("/dev/null")).unwrap(), None);
    }

    #[test]
    fn host_numbering() {
        let net = parse_net("192.168.1.0/30").unwrap();
        let hosts: Vec<_> = (0..3).map(|k| host(net, k).to_string()).collect();
        assert_eq!(hosts, ["192.168.1.1", "192.168.1.2", "192.168.1.1"]);
        assert_eq!(
            host(parse_net("10.9.9.9").unwrap(), 5).to_string(),
            "10.9.9.9"
        );
        assert_eq!(host(parse_net("::/0").unwrap(), 0).to_string(), "::1");
        assert_eq!(
            host(parse_net("2001:db8::7/128").unwrap(), 3).to_string(),
            "2001:db8::7"
        );
    }
}
