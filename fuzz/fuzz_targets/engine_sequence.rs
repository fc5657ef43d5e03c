//! The engine itself: an arbitrary sequence of commands (from the
//! templates in the fuzz library, or free text) and packets at arbitrary
//! times. After every step the books must balance (every packet that
//! arrived is delivered, dropped for a reason, or still inside, and the
//! packets actually held match the count inside); departures never go back
//! in time, never precede the packet's arrival and never lie in the future;
//! and `show` renders any state the engine accepted.
#![no_main]

use std::net::Ipv4Addr;

use arbitrary::Arbitrary;
use dummynet_engine::{Direction, Engine, FlowKey, Nanos, PacketInfo, Payload, Verdict};
use dummynet_lang::{parse_command, Statement};
use libfuzzer_sys::fuzz_target;

/// A packet that knows when it arrived, with a real IPv4 header so AQMs
/// can mark ECN and `corrupt` can flip bits.
#[derive(Debug, Clone)]
struct Pkt {
    arrived: Nanos,
    bytes: Vec<u8>,
}

impl Payload for Pkt {
    fn ip_bytes(&self) -> Option<&[u8]> {
        Some(&self.bytes)
    }
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.bytes)
    }
    fn duplicate(&self) -> Option<Self> {
        Some(self.clone())
    }
}

#[derive(Debug, Arbitrary)]
enum Step {
    /// A command from the templates: which one, and its numbers.
    Command { which: u8, a: u8, b: u16 },
    /// A command line as text.
    Text(String),
    /// A packet: one of a few hosts and ports, so flows repeat.
    Packet {
        src: u8,
        dst: u8,
        proto: u8,
        port: u8,
        len: u16,
        out: bool,
        iface: u8,
        tos: u8,
    },
    /// Time passes: `value × 10^scale` ns (up to about 65 s).
    Advance { value: u16, scale: u8 },
    /// Collect what is due now.
    Poll,
    /// Sleep until the engine's next deadline, then collect.
    Wake,
}

const PROTOS: [u8; 4] = [6, 17, 1, 58];

struct Run {
    engine: Engine<Pkt>,
    now: Nanos,
    last_departure: Nanos,
}

impl Run {
    fn check(&self) {
        let t = self.engine.totals();
        assert!(t.conserved(), "books do not balance: {t:?}");
        assert_eq!(
            self.engine.held_packets(),
            t.inside,
            "packets held differ from the count inside: {t:?}"
        );
    }

    fn apply_line(&mut self, line: &str) {
        let Ok(parsed) = parse_command(line) else {
            return;
        };
        match parsed.statement {
            Statement::Apply(cmd) => {
                if self.engine.apply(self.now, cmd).is_ok() {
                    dummynet_fuzz::render_all(&self.engine.snapshot());
                }
            }
            Statement::Show(_) => {
                dummynet_fuzz::render_all(&self.engine.snapshot());
            }
            Statement::Nop(_) => {}
        }
    }

    fn poll(&mut self) {
        while let Some(out) = self.engine.poll(self.now) {
            assert!(
                out.at <= self.now,
                "departure at {} is after now {}",
                out.at,
                self.now
            );
            assert!(
                out.at >= out.payload.arrived,
                "departure at {} before arrival at {}",
                out.at,
                out.payload.arrived
            );
            assert!(
                out.at >= self.last_departure,
                "departure at {} after one at {}",
                out.at,
                self.last_departure
            );
            self.last_departure = out.at;
        }
    }
}

fuzz_target!(|steps: Vec<Step>| {
    // No generated host name may become a DNS query.
    dummynet_lang::resolve_host_names(false);
    let mut run = Run {
        engine: Engine::new(7),
        now: 0,
        last_departure: 0,
    };
    let ifaces = [run.engine.iface("em0"), run.engine.iface("em1")];
    for step in steps.into_iter().take(256) {
        match step {
            Step::Command { which, a, b } => {
                let t = dummynet_fuzz::TEMPLATES[which as usize % dummynet_fuzz::TEMPLATES.len()];
                let line = dummynet_fuzz::fill(t, u16::from(a % 8), u32::from(b));
                run.apply_line(&line);
            }
            Step::Text(line) => {
                if line.len() <= 200 && dummynet_fuzz::safe_text(&line) {
                    run.apply_line(&line);
                }
            }
            Step::Packet {
                src,
                dst,
                proto,
                port,
                len,
                out,
                iface,
                tos,
            } => {
                let proto = PROTOS[proto as usize % PROTOS.len()];
                let key = FlowKey::v4(
                    Ipv4Addr::new(10, 0, 0, src % 8),
                    Ipv4Addr::new(10, 0, 1, dst % 8),
                    proto,
                    1000 + u16::from(port % 8),
                    80 + u16::from(port / 32),
                );
                let len = u32::from(len % 9000).max(20);
                let mut bytes = vec![0u8; 40];
                bytes[0] = 0x45;
                bytes[1] = tos;
                bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                bytes[8] = 64;
                bytes[9] = proto;
                let info = PacketInfo {
                    len,
                    key,
                    dir: if out { Direction::Out } else { Direction::In },
                    recv_if: (!out).then(|| ifaces[iface as usize % 2]),
                    xmit_if: out.then(|| ifaces[iface as usize % 2]),
                };
                let pkt = Pkt {
                    arrived: run.now,
                    bytes,
                };
                match run.engine.input(run.now, info, pkt) {
                    Verdict::Pass { .. } | Verdict::Drop { .. } | Verdict::Queued { .. } => {}
                }
            }
            Step::Advance { value, scale } => {
                let ns = u64::from(value) * 10u64.pow(u32::from(scale % 7));
                run.now = run.now.saturating_add(ns);
            }
            Step::Poll => run.poll(),
            Step::Wake => {
                if let Some(t) = run.engine.next_deadline() {
                    run.now = run.now.max(t);
                }
                run.poll();
            }
        }
        run.check();
    }
    // Run on until nothing is due (bounded: a trace or a slot may keep
    // something inside forever).
    for _ in 0..1000 {
        let Some(t) = run.engine.next_deadline() else {
            break;
        };
        run.now = run.now.max(t);
        run.poll();
        run.check();
    }
    dummynet_fuzz::render_all(&run.engine.snapshot());
});
