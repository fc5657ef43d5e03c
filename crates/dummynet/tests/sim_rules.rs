//! `dummynet sim` with a stateful ruleset: a TCP session passes both ways,
//! the unsolicited is dropped, and `me` is what `--me` says.

mod sim_common;

use std::path::{Path, PathBuf};

use etherparse::PacketBuilder;
use pcap_file::DataLink;
use sim_common::*;

fn scratch(name: &str) -> PathBuf {
    sim_common::scratch("sim-rules-tests", name)
}

/// A raw-IP capture of (ms, packet).
fn pcap(p: &Path, frames: &[(u64, Vec<u8>)]) {
    let timed: Vec<(u64, Vec<u8>)> = frames.iter().map(|(ms, f)| (ms * MS, f.clone())).collect();
    write_pcap(p, DataLink::RAW, &timed);
}

fn tcp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, flags: &str) -> Vec<u8> {
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sport, dport, 1, 65535);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(1),
            'P' => b.psh(),
            _ => unreachable!(),
        };
    }
    let mut out = Vec::new();
    b.write(&mut out, b"x").unwrap();
    out
}

/// Runs the session through the stateful rules; returns (departed ids,
/// dropped (id, rule)).
fn run(d: &Path, me: Option<&str>) -> (Vec<u64>, Vec<(u64, u64)>) {
    let conf = write(
        d,
        "rules.conf",
        "ipfw add 100 check-state\n\
         ipfw add 200 allow tcp from me to any setup keep-state\n\
         ipfw add 300 deny ip from any to any\n",
    );
    let (me_ip, srv, other) = ([10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 3]);
    pcap(
        &d.join("sent.pcap"),
        &[
            (0, tcp(me_ip, 5000, srv, 80, "S")),
            (2, tcp(me_ip, 5000, srv, 80, "A")),
        ],
    );
    pcap(
        &d.join("received.pcap"),
        &[
            (1, tcp(srv, 80, me_ip, 5000, "SA")),
            (3, tcp(srv, 80, me_ip, 5000, "PA")),
            (4, tcp(other, 4000, me_ip, 22, "S")),
        ],
    );
    let sent = format!("{}@eth0:out", s(&d.join("sent.pcap")));
    let received = format!("{}@eth0:in", s(&d.join("received.pcap")));
    let extra: Vec<&str> = me.map(|m| vec!["--me", m]).unwrap_or_default();
    let r = sim(d, &conf, &[&sent, &received], &extra);
    let mut departed = Vec::new();
    let mut dropped = Vec::new();
    for e in &r.log {
        match e["event"].as_str() {
            Some("departure") => departed.push(e["id"].as_u64().unwrap()),
            Some("drop") => dropped.push((e["id"].as_u64().unwrap(), e["rule"].as_u64().unwrap())),
            _ => {}
        }
    }
    assert_eq!(departed.len() + dropped.len(), 5, "every packet ends once");
    (departed, dropped)
}

#[test]
fn a_tcp_session_passes_by_its_state_and_the_unsolicited_is_dropped() {
    let d = scratch("stateful");
    let (departed, dropped) = run(&d, Some("10.0.0.1"));
    // Arrival order (ids) is time order: SYN, SYN-ACK, ACK, data, stranger.
    assert_eq!(departed, [0, 1, 2, 3]);
    assert_eq!(dropped, [(4, 300)]);
    // Without --me, `from me` matches nothing: no state, all denied.
    let (departed, dropped) = run(&d, None);
    assert!(departed.is_empty());
    assert_eq!(dropped.len(), 5);
}

#[test]
fn a_config_files_doubtful_values_are_warned_with_their_line() {
    let d = scratch("bw-warning");
    let conf = write(
        &d,
        "c.conf",
        "# a link\npipe 1 config bw 10\nadd 100 pipe 1 ip from any to any\n",
    );
    pcap(
        &d.join("in.pcap"),
        &[(0, tcp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, "S"))],
    );
    let r = sim(&d, &conf, &[s(&d.join("in.pcap"))], &[]);
    let err = &r.stderr;
    assert!(
        err.contains("config line 2: warning: `bw 10` is 10 bit/s"),
        "{err}"
    );
}

/// `type fq_codel` on a pipe sets scheduler 1, which packets sent to `pipe
/// 1` never meet (as in FreeBSD): said once, at the line that makes it so,
/// with the rule and the fix.
#[test]
fn a_pipe_rule_that_bypasses_the_pipes_fq_codel_is_warned_once() {
    let d = scratch("fq-bypass");
    let conf = write(
        &d,
        "c.conf",
        "pipe 1 config bw 10Mbit/s type fq_codel\n\
         add 100 pipe 1 ip from any to any\n\
         add 200 allow ip from any to any\n",
    );
    pcap(
        &d.join("in.pcap"),
        &[(0, tcp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, "S"))],
    );
    let r = sim(&d, &conf, &[s(&d.join("in.pcap"))], &[]);
    let err = &r.stderr;
    let want = "config line 2: warning: rule 100 sends to pipe 1, whose packets go through \
                the pipe's own FIFO queue, not its FQ_CODEL scheduler (as in FreeBSD); for \
                FQ_CODEL, send them to a queue of it: `queue N config pipe 1` and \
                `add ... queue N`";
    assert!(err.contains(want), "{err}");
    assert_eq!(err.matches("warning: rule").count(), 1, "once: {err}");
}
