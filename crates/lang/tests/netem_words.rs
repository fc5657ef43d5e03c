//! netem's words in a pipe's options (issue 29): `rate` with tc's units,
//! `limit` as the queue in packets, and clear answers to the ways netem's
//! users write what the language spells otherwise.

use dummynet_engine::config::{Command, PipeConfig, QueueLimit};
use dummynet_lang::{parse_command, Parsed, Statement};

fn pipe(line: &str) -> (PipeConfig, Vec<String>) {
    match parse_command(line) {
        Ok(Parsed {
            statement: Statement::Apply(Command::ConfigPipe(_, c)),
            notes,
            ..
        }) => (c, notes),
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn rate_reads_tcs_units() {
    for (line, bps) in [
        ("pipe 1 config rate 1mbit", 1_000_000),
        ("pipe 1 config rate 500kbit delay 10ms", 500_000),
        // tc's `mbps` is megabytes per second; a bare number is bit/s.
        ("pipe 1 config rate 2mbps", 16_000_000),
        ("pipe 1 config rate 20000", 20_000),
        ("pipe 1 config delay 100ms rate 1gbit", 1_000_000_000),
    ] {
        let (c, notes) = pipe(line);
        assert_eq!(c.link.bw, bps, "{line}");
        assert!(notes.is_empty(), "{line}: {notes:?}");
    }
    let e = parse_command("pipe 1 config rate fast").unwrap_err();
    assert!(e.message.contains("a rate as tc writes it"), "{e}");
    assert_eq!(e.column, 20, "{e}");
    // A rate and a trace are two rates.
    assert!(parse_command("pipe 1 config rate 1mbit trace x.trace").is_err());
}

#[test]
fn limit_is_the_queue_in_packets() {
    let (c, _) = pipe("pipe 1 config limit 100 delay 10ms");
    assert_eq!(c.flowset.limit, QueueLimit::Slots(100));
    let e = parse_command("pipe 1 config limit 100kb").unwrap_err();
    assert!(e.message.contains("a number of packets"), "{e}");
}

#[test]
fn netems_loss_random_is_taken() {
    let (a, _) = pipe("pipe 1 config loss random 5%");
    let (b, _) = pipe("pipe 1 config loss 5%");
    assert_eq!(a.flowset, b.flowset);
}

#[test]
fn a_unit_written_apart_is_refused_with_the_way_to_write_it() {
    let e = parse_command("pipe 1 config delay 100 ms").unwrap_err();
    assert_eq!(e.message, "write the unit without a space: `100ms`");
    assert_eq!(e.column, 25);
    let e = parse_command("pipe 1 config delay 2.5 sec loss 1%").unwrap_err();
    assert_eq!(e.message, "write the unit without a space: `2.5sec`");
    // A bare number is still ipfw's milliseconds.
    assert_eq!(pipe("pipe 1 config delay 100").0.link.delay, 100_000_000);
}

#[test]
fn bw_in_bps_keeps_ipfws_bits_and_names_tcs_bytes() {
    let (c, notes) = pipe("pipe 1 config bw 5mbps");
    assert_eq!(c.link.bw, 5_000_000);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("`bw 5mbps` is 5mbit/s")
            && notes[0].contains("in tc, `mbps` is bytes per second"),
        "{}",
        notes[0]
    );
    assert!(notes[0].contains("`bw 5MByte/s`"), "{}", notes[0]);
    // Bit units say nothing.
    assert!(pipe("pipe 1 config bw 5Mbit/s").1.is_empty());
}

#[test]
fn netems_near_misses_get_did_you_mean() {
    for (line, meant) in [
        ("pipe 1 config dupe 5%", "duplicate"),
        ("pipe 1 config dup 5%", "duplicate"),
        ("queue 1 config dup 1%", "duplicate"),
        ("pipe 1 config latency 10ms", "delay"),
    ] {
        let e = parse_command(line).unwrap_err();
        assert_eq!(e.suggestion, Some(meant), "{line}: {e}");
        assert!(
            e.message.contains(&format!("did you mean `{meant}`?")),
            "{e}"
        );
    }
}
