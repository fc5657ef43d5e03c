//! Capture files: reading pcap and pcapng, writing nanosecond pcap.
//!
//! Reading works on the file's bytes in memory: `sim` needs every packet
//! before it starts anyway (inputs are merged by timestamp), and a slice
//! parser is what the no-panic property test can drive directly.
//!
//! pcap-file does the framing; timestamps and link types are interpreted
//! here, because its pcapng reader takes every timestamp as nanoseconds
//! whatever the interface's `if_tsresol` says, and its strict pcap reader
//! rejects records whose original length exceeds the snap length (every
//! `tcpdump -s 96` capture).

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dummynet_engine::wire::LinkType;
use dummynet_engine::Nanos;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapParser, PcapWriter};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

/// Why a capture cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// What is wrong inside the file at `path`.
    #[error("{}: {error}", path.display())]
    In {
        path: PathBuf,
        error: Box<CaptureError>,
    },
    #[error("not a pcap or pcapng file: shorter than a file header")]
    TooShort,
    #[error(
        "not a pcap or pcapng file (starts with {:02x} {:02x} {:02x} {:02x})",
        .0[0], .0[1], .0[2], .0[3]
    )]
    NotACapture([u8; 4]),
    /// The pcap file header or the pcapng section header.
    #[error("bad {header}: {why}")]
    Header { header: &'static str, why: String },
    /// A pcap record, counted from 1.
    #[error("packet {number} (byte offset {offset}): {why}")]
    Record {
        number: usize,
        offset: usize,
        why: String,
    },
    #[error("block at byte offset {offset}: {why}")]
    Block { offset: usize, why: String },
    #[error(
        "block at byte offset {0}: simple packet blocks carry no timestamp; \
         convert the file with `editcap -F pcap`"
    )]
    SimplePacket(usize),
    #[error("packet at byte offset {offset} names interface {iface}, which is not described")]
    NoSuchInterface { offset: usize, iface: u32 },
    #[error("mixes link types {0} and {1} in one file; sim needs one link type")]
    MixedLinkTypes(u32, u32),
    #[error("packet at byte offset {0}: timestamp out of range")]
    TimestampOutOfRange(usize),
    #[error("no interface described")]
    NoInterface,
    /// A LINKTYPE sim cannot read, and its name.
    #[error(
        "link type {linktype} ({name}) is not supported: use Ethernet (1) or raw IP (101, 228, 229)"
    )]
    Unsupported { linktype: u32, name: String },
    /// Writing: the pcap writer's own error.
    #[error("{0}")]
    Write(String),
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts: Nanos,
    /// Length on the wire; at least `data.len()`.
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// The frames of one file, in file order, and their link type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The pcap LINKTYPE number, kept to write the output with the same one.
    pub linktype: u32,
    pub link: LinkType,
    pub frames: Vec<Frame>,
}

/// The link types `sim` understands, by LINKTYPE number.
pub fn link_type(linktype: u32) -> Option<LinkType> {
    match linktype {
        1 => Some(LinkType::Ethernet),
        // LINKTYPE_RAW, and the DLT_RAW values some BSDs write into files.
        101 | 12 | 14 => Some(LinkType::RawIp),
        228 => Some(LinkType::Ipv4),
        229 => Some(LinkType::Ipv6),
        113 => Some(LinkType::LinuxSll),
        276 => Some(LinkType::LinuxSll2),
        _ => None,
    }
}

/// Reads and parses the capture at `path`.
pub fn read_file(path: &Path) -> Result<Capture, CaptureError> {
    let bytes = std::fs::read(path).map_err(|source| CaptureError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes).map_err(|e| CaptureError::In {
        path: path.to_path_buf(),
        error: Box::new(e),
    })
}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const PCAP_MAGICS: [u32; 2] = [0xa1b2_c3d4, 0xa1b2_3c4d];

/// Parses a whole pcap or pcapng file.
pub fn parse(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let magic: [u8; 4] = match bytes.get(..4).and_then(|m| m.try_into().ok()) {
        Some(m) => m,
        None => return Err(CaptureError::TooShort),
    };
    if magic == PCAPNG_MAGIC {
        return parse_pcapng(bytes);
    }
    if PCAP_MAGICS.contains(&u32::from_be_bytes(magic))
        || PCAP_MAGICS.contains(&u32::from_le_bytes(magic))
    {
        return parse_pcap(bytes);
    }
    Err(CaptureError::NotACapture(magic))
}

fn parse_pcap(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| CaptureError::Header {
        header: "pcap file header",
        why: why(e),
    })?;
    let header = parser.header();
    let linktype = u32::from(header.datalink);
    let link = supported(linktype)?;
    let frac_ns: u64 = match header.ts_resolution {
        TsResolution::MicroSecond => 1_000,
        TsResolution::NanoSecond => 1,
    };
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let (next, raw) = parser
            .next_raw_packet(rest)
            .map_err(|e| CaptureError::Record {
                number: frames.len() + 1,
                offset: bytes.len() - rest.len(),
                why: why(e),
            })?;
        rest = next;
        frames.push(Frame {
            ts: u64::from(raw.ts_sec) * 1_000_000_000 + u64::from(raw.ts_frac) * frac_ns,
            orig_len: raw.orig_len.max(len32(&raw.data)),
            data: raw.data.into_owned(),
        });
    }
    Ok(Capture {
        linktype,
        link,
        frames,
    })
}

/// An interface of the current pcapng section, as far as timestamps go.
struct Iface {
    linktype: u32,
    /// Timestamp units per second are `10^-exp` or `2^-exp` seconds.
    resol: u8,
    /// `if_tsoffset`: seconds added to every timestamp.
    offset_s: u64,
}

impl Iface {
    fn new(idb: &InterfaceDescriptionBlock) -> Self {
        let mut iface = Iface {
            linktype: u32::from(idb.linktype),
            resol: 6,
            offset_s: 0,
        };
        for opt in &idb.options {
            match opt {
                InterfaceDescriptionOption::IfTsResol(r) => iface.resol = *r,
                InterfaceDescriptionOption::IfTsOffset(o) => iface.offset_s = *o,
                _ => {}
            }
        }
        iface
    }

    /// A raw timestamp in nanoseconds since the epoch, or `None` if it does
    /// not fit in 64 bits of nanoseconds (past the year 2554).
    fn nanos(&self, raw: u64) -> Option<Nanos> {
        let raw = u128::from(raw);
        let ns = if self.resol & 0x80 != 0 {
            (raw * 1_000_000_000) >> (self.resol & 0x7f)
        } else {
            match self.resol {
                e @ 0..=9 => raw * 10u128.pow(9 - u32::from(e)),
                e => raw / 10u128.checked_pow(u32::from(e) - 9).unwrap_or(u128::MAX),
            }
        };
        u64::try_from(ns + u128::from(self.offset_s) * 1_000_000_000).ok()
    }
}

fn parse_pcapng(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let (mut rest, mut parser) = PcapNgParser::new(bytes).map_err(|e| CaptureError::Header {
        header: "pcapng section header",
        why: why(e),
    })?;
    let mut ifaces: Vec<Iface> = Vec::new();
    let mut linktype: Option<u32> = None;
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let at = bytes.len() - rest.len();
        let (next, block) = parser.next_block(rest).map_err(|e| CaptureError::Block {
            offset: at,
            why: why(e),
        })?;
        rest = next;
        let (iface_id, raw_ts, orig_len, data) = match block {
            Block::SectionHeader(_) => {
                ifaces.clear();
                continue;
            }
            Block::InterfaceDescription(idb) => {
                ifaces.push(Iface::new(&idb));
                continue;
            }
            Block::EnhancedPacket(epb) => {
                // pcap-file stored the raw 64-bit count as if it were nanoseconds.
                let raw = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                (epb.interface_id, raw, epb.original_len, epb.data)
            }
            Block::Packet(pb) => (
                u32::from(pb.interface_id),
                pb.timestamp,
                pb.original_len,
                pb.data,
            ),
            Block::SimplePacket(_) => return Err(CaptureError::SimplePacket(at)),
            _ => continue,
        };
        let iface = ifaces
            .get(iface_id as usize)
            .ok_or(CaptureError::NoSuchInterface {
                offset: at,
                iface: iface_id,
            })?;
        match linktype {
            None => linktype = Some(iface.linktype),
            Some(l) if l != iface.linktype => {
                return Err(CaptureError::MixedLinkTypes(l, iface.linktype))
            }
            Some(_) => {}
        }
        let ts = iface
            .nanos(raw_ts)
            .ok_or(CaptureError::TimestampOutOfRange(at))?;
        frames.push(Frame {
            ts,
            orig_len: orig_len.max(len32(&data)),
            data: data.into_owned(),
        });
    }
    // A file without packets still has a link type if it describes an interface.
    let linktype = linktype
        .or(ifaces.first().map(|i| i.linktype))
        .ok_or(CaptureError::NoInterface)?;
    let link = supported(linktype)?;
    Ok(Capture {
        linktype,
        link,
        frames,
    })
}

fn supported(linktype: u32) -> Result<LinkType, CaptureError> {
    link_type(linktype).ok_or_else(|| CaptureError::Unsupported {
        linktype,
        name: format!("{:?}", DataLink::from(linktype)),
    })
}

fn why(e: PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => "file ends in the middle of a record (truncated?)".into(),
        e => e.to_string(),
    }
}

fn len32(data: &[u8]) -> u32 {
    u32::try_from(data.len()).unwrap_or(u32::MAX)
}

/// Writes pcap with nanosecond timestamps (magic `a1b23c4d`, little-endian).
pub struct Writer<W: Write> {
    inner: PcapWriter<W>,
}

/// The largest frame any capture tool writes (tcpdump's default snap length).
pub const SNAPLEN: u32 = 262_144;

impl<W: Write> Writer<W> {
    pub fn new(out: W, linktype: u32) -> Result<Self, CaptureError> {
        Self::with_snaplen(out, linktype, SNAPLEN)
    }

    /// A writer whose header says frames were cut to `snaplen` bytes (a
    /// live capture keeps only the first bytes of each).
    pub fn with_snaplen(out: W, linktype: u32, snaplen: u32) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            snaplen,
            datalink: DataLink::from(linktype),
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            ..PcapHeader::default()
        };
        let inner =
            PcapWriter::with_header(out, header).map_err(|e| CaptureError::Write(e.to_string()))?;
        Ok(Writer { inner })
    }

    pub fn write(&mut self, ts: Nanos, orig_len: u32, data: &[u8]) -> Result<(), CaptureError> {
        // Frames longer than the snap length are cut, as a capture would.
        let data = data.get(..SNAPLEN as usize).unwrap_or(data);
        let packet = PcapPacket {
            timestamp: Duration::from_nanos(ts),
            orig_len: orig_len.max(len32(data)),
            data: Cow::Borrowed(data),
        };
        self.inner
            .write_packet(&packet)
            .map(drop)
            .map_err(|e| CaptureError::Write(e.to_string()))
    }

    pub fn into_inner(self) -> W {
        self.inner.into_writer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap_header(magic: u32, linktype: u32) -> Vec<u8> {
        let mut h = magic.to_le_bytes().to_vec();
        h.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        h.extend_from_slice(&96u32.to_le_bytes());
        h.extend_from_slice(&linktype.to_le_bytes());
        h
    }

    fn record(sec: u32, frac: u32, data: &[u8], orig: u32) -> Vec<u8> {
        let mut r = Vec::new();
        for v in [sec, frac, data.len() as u32, orig] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(data);
        r
    }

    #[test]
    fn microsecond_pcap_with_snapped_records() {
        let mut f = pcap_header(0xa1b2_c3d4, 101);
        f.extend(record(3, 250_000, &[0x45; 20], 1500));
        let c = parse(&f).unwrap();
        assert_eq!(c.link, LinkType::RawIp);
        assert_eq!(
            c.frames,
            vec![Frame {
                ts: 3_250_000_000,
                orig_len: 1500,
                data: vec![0x45; 20]
            }]
        );
    }

    #[test]
    fn write_then_read_keeps_nanoseconds() {
        let mut w = Writer::new(Vec::new(), 1).unwrap();
        w.write(1_000_000_007, 60, &[1; 60]).unwrap();
        w.write(2_000_000_000, 1514, &[2; 100]).unwrap();
        let bytes = w.into_inner();
        assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
        let c = parse(&bytes).unwrap();
        assert_eq!(c.linktype, 1);
        assert_eq!(c.frames[0].ts, 1_000_000_007);
        assert_eq!(c.frames[1].orig_len, 1514);
        assert_eq!(c.frames[1].data, vec![2; 100]);
    }

    /// A little-endian pcapng block.
    fn block(kind: u32, body: &[u8]) -> Vec<u8> {
        let len = 12 + body.len() as u32;
        let mut b = kind.to_le_bytes().to_vec();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&len.to_le_bytes());
        b
    }

    fn shb() -> Vec<u8> {
        let mut body = 0x1a2b_3c4du32.to_le_bytes().to_vec();
        body.extend_from_slice(&[1, 0, 0, 0]);
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        block(0x0a0d_0d0a, &body)
    }

    fn idb(linktype: u16, tsresol: Option<u8>) -> Vec<u8> {
        let mut body = linktype.to_le_bytes().to_vec();
        body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        if let Some(r) = tsresol {
            body.extend_from_slice(&[9, 0, 1, 0, r, 0, 0, 0, 0, 0, 0, 0]);
        }
        block(1, &body)
    }

    fn epb(iface: u32, ts: u64, data: &[u8]) -> Vec<u8> {
        let mut body = iface.to_le_bytes().to_vec();
        body.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(ts as u32).to_le_bytes());
        body.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(data);
        body.resize(body.len().div_ceil(4) * 4, 0);
        block(6, &body)
    }

    #[test]
    fn pcapng_timestamps_follow_if_tsresol() {
        let mut f = shb();
        f.extend(idb(1, None)); // microseconds by default
        f.extend(idb(1, Some(9)));
        f.extend(idb(1, Some(0x80 | 10))); // 1/1024 s
        f.extend(epb(0, 1_500_000, &[0; 14]));
        f.extend(epb(1, 1_500_000_001, &[0; 14]));
        f.extend(epb(2, 2048 + 256, &[0; 14]));
        let c = parse(&f).unwrap();
        let ts: Vec<_> = c.frames.iter().map(|f| f.ts).collect();
        assert_eq!(ts, [1_500_000_000, 1_500_000_001, 2_250_000_000]);
    }

    /// The error's words, after checking its kind.
    fn refused(bytes: &[u8], kind: fn(&CaptureError) -> bool) -> String {
        match parse(bytes) {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => {
                assert!(kind(&e), "{e:?}");
                e.to_string()
            }
        }
    }

    #[test]
    fn pcapng_errors_are_specific() {
        let mut mixed = shb();
        mixed.extend(idb(1, None));
        mixed.extend(idb(101, None));
        mixed.extend(epb(0, 1, &[0; 14]));
        mixed.extend(epb(1, 2, &[0x45; 20]));
        let e = refused(&mixed, |e| {
            matches!(e, CaptureError::MixedLinkTypes(1, 101))
        });
        assert!(e.contains("mixes link types 1 and 101"), "{e}");

        let mut orphan = shb();
        orphan.extend(epb(3, 1, &[0; 14]));
        let e = refused(&orphan, |e| {
            matches!(e, CaptureError::NoSuchInterface { iface: 3, .. })
        });
        assert!(e.contains("interface 3"), "{e}");
    }

    #[test]
    fn unsupported_and_garbage_files_are_errors() {
        let e = refused(&pcap_header(0xa1b2_c3d4, 105), |e| {
            matches!(e, CaptureError::Unsupported { linktype: 105, .. })
        });
        assert!(e.contains("link type 105"), "{e}");
        let e = refused(
            b"hello world",
            |e| matches!(e, CaptureError::NotACapture(m) if m == b"hell"),
        );
        assert!(
            e.starts_with("not a pcap or pcapng file (starts with 68 65 6c 6c)"),
            "{e}"
        );
        let e = refused(b"", |e| matches!(e, CaptureError::TooShort));
        assert!(e.contains("not a pcap"), "{e}");
        let mut cut = pcap_header(0xa1b2_c3d4, 1);
        cut.extend(record(0, 0, &[0; 60], 60));
        cut.truncate(cut.len() - 1);
        let e = refused(&cut, |e| {
            matches!(
                e,
                CaptureError::Record {
                    number: 1,
                    offset: 24,
                    ..
                }
            )
        });
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn a_file_error_names_the_file() {
        let missing = Path::new("/nonexistent/in.pcap");
        let e = read_file(missing).err();
        assert!(matches!(e, Some(CaptureError::Read { .. })), "{e:?}");
        let dir = std::env::temp_dir().join(format!("dn-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("garbage.pcap");
        std::fs::write(&path, b"hello world").unwrap();
        let e = read_file(&path).err().map(|e| e.to_string());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            e,
            Some(format!(
                "{}: not a pcap or pcapng file (starts with 68 65 6c 6c)",
                path.display()
            ))
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..300), kind in 0..4u8) {
            let mut f = match kind {
                0 => pcap_header(0xa1b2_c3d4, 1),
                1 => pcap_header(0xa1b2_3c4d, 101),
                2 => shb(),
                _ => Vec::new(),
            };
            f.extend(tail);
            let _ = parse(&f);
        }

        #[test]
        fn never_panics_on_pcapng_blocks(
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            kind in proptest::sample::select(vec![1u32, 2, 3, 4, 5, 6, 0x0a0d_0d0a, 99]),
        ) {
            let mut f = shb();
            f.extend(idb(1, Some(9)));
            f.extend(block(kind, &body));
            let _ = parse(&f);
        }
    }
}
