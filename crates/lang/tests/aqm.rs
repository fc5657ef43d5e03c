//! Queue management on `pipe`/`queue config`: every AQM option into its
//! config, the sysctls that fill omitted values when the engine applies a
//! command, and errors that point at the word at fault.

mod common;

use common::err;

use dummynet_engine::config::{
    AqmConfig, CodelConfig, Command, FlowsetConfig, PieConfig, QueueLimit, RedConfig, Setting,
    Settings,
};
use dummynet_engine::params::to_ppb;
use dummynet_engine::time::{NS_PER_MS, NS_PER_US};
use dummynet_engine::Engine;
use dummynet_lang::{format_pipes, format_scheds, parse_command, ErrorKind, Statement};

const MS: u64 = NS_PER_MS;

fn flowset(line: &str) -> FlowsetConfig {
    match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(Command::ConfigPipe(_, c))) => c.flowset,
        Ok(Statement::Apply(Command::ConfigQueue(_, c))) => c.flowset,
        other => panic!("{line}: {other:?}"),
    }
}

/// The AQM as the line writes it.
fn aqm(line: &str) -> AqmConfig {
    flowset(line).aqm
}

/// The CoDel a line configures, read as the engine reads it (with
/// FreeBSD's defaults for what it leaves out).
fn codel(line: &str) -> CodelConfig {
    let a = aqm(line);
    assert_eq!(a.kind.name, "codel", "{line}");
    CodelConfig::from_params(&a.params).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn pie(line: &str) -> PieConfig {
    let a = aqm(line);
    assert_eq!(a.kind.name, "pie", "{line}");
    PieConfig::from_params(&a.params, "pie", PieConfig::default())
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// The RED or GRED a line configures: its name and values.
fn red(line: &str) -> (&'static str, RedConfig) {
    let a = aqm(line);
    let gentle = a.kind.name == "gred";
    let c = RedConfig::from_params(&a.params, gentle).unwrap_or_else(|e| panic!("{line}: {e}"));
    (a.kind.name, c)
}

fn red_values(w_q: f64, min_th: u64, max_th: u64, max_p: f64, ecn: bool) -> RedConfig {
    RedConfig {
        w_q,
        min_th,
        max_th,
        max_p,
        ecn,
    }
}

/// `show`'s text after applying `lines` to a new engine, in order.
fn applied(lines: &[&str]) -> Engine<u64> {
    let mut e: Engine<u64> = Engine::new(1);
    for line in lines {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        e.apply(0, c)
            .unwrap_or_else(|err| panic!("{line}: {err:?}"));
    }
    e
}

#[test]
fn droptail_is_the_default_and_can_be_asked_for() {
    assert_eq!(aqm("pipe 1 config bw 1Mbit/s"), AqmConfig::droptail());
    assert_eq!(aqm("pipe 1 config codel droptail"), AqmConfig::droptail());
    assert_eq!(aqm("queue 1 config pipe 1 droptail"), AqmConfig::droptail());
    assert!(aqm("pipe 1 config droptail").is_droptail());
}

#[test]
fn red_and_gred() {
    assert_eq!(
        red("pipe 1 config red 0.002/5/15/0.1"),
        ("red", red_values(0.002, 5, 15, 0.1, false))
    );
    assert_eq!(
        red("queue 2 config pipe 1 gred 0.5/10/30/1"),
        ("gred", red_values(0.5, 10, 30, 1.0, false))
    );
    // Thresholds in bytes when the queue is in bytes; K is x1024, as in ipfw.
    let fs = flowset("pipe 1 config queue 100KB gred 0.005/10K/30k/0.2");
    assert_eq!(fs.limit, QueueLimit::Bytes(100 * 1024));
    assert_eq!(
        red("pipe 1 config queue 100KB gred 0.005/10K/30k/0.2"),
        ("gred", red_values(0.005, 10240, 30720, 0.2, false))
    );
    // `ecn` is the flowset's flag, before or after `red`.
    for line in [
        "pipe 1 config red 0.002/5/15/0.1 ecn",
        "pipe 1 config ecn red 0.002/5/15/0.1",
    ] {
        assert_eq!(
            red(line),
            ("red", red_values(0.002, 5, 15, 0.1, true)),
            "{line}"
        );
    }
    // The values as written travel exactly: nine decimal places.
    let a = aqm("pipe 1 config red 0.000123456/5/15/0.1");
    assert!(a.params.contains(&("w_q".into(), 123_456)), "{a:?}");
}

#[test]
fn codel_options() {
    let c = |target, interval, ecn| CodelConfig {
        target,
        interval,
        ecn,
    };
    assert_eq!(codel("pipe 1 config codel"), c(5 * MS, 100 * MS, false));
    assert_eq!(
        codel("pipe 1 config codel target 7 interval 160 ecn"),
        c(7 * MS, 160 * MS, true)
    );
    assert_eq!(
        codel("pipe 1 config codel interval 1s target 500us ecn noecn"),
        c(500 * NS_PER_US, 1000 * MS, false)
    );
    // Only what is written is in the command; a repeated word, once.
    assert_eq!(
        aqm("pipe 1 config codel ecn noecn").params,
        vec![("ecn".to_string(), 0)]
    );
    // The parameters end at the first word that is not one; options go on.
    let line = "pipe 1 config bw 1Mbit/s codel target 7 queue 100 plr 0.01";
    assert_eq!(codel(line), c(7 * MS, 100 * MS, false));
    assert_eq!(flowset(line).limit, QueueLimit::Slots(100));
}

#[test]
fn pie_options() {
    assert_eq!(pie("pipe 1 config pie"), PieConfig::default());
    let all = "pipe 1 config pie target 20ms tupdate 30 max_burst 100 max_ecnth 0.2 \
               alpha 0.25 beta 2 ecn nocapdrop onoff ts noderand";
    assert_eq!(
        pie(all),
        PieConfig {
            target: 20 * MS,
            tupdate: 30 * MS,
            max_burst: 100 * MS,
            max_ecnth: 0.2,
            alpha: 0.25,
            beta: 2.0,
            ecn: true,
            capdrop: false,
            onoff: true,
            dre: false,
            derand: false,
        }
    );
    let p = pie("queue 1 config pie ts dre nocapdrop capdrop noderand derand");
    assert!(p.dre && p.capdrop && p.derand);
}

/// FreeBSD's kernel fills what a command leaves out from the sysctls when it
/// configures the object; so does the engine. What the command gives wins,
/// and objects configured before keep their values.
#[test]
fn sysctls_fill_what_codel_and_pie_leave_out_when_applied() {
    let e = applied(&[
        "pipe 9 config codel",
        "sysctl net.inet.ip.dummynet.codel.target=7000",
        "sysctl net.inet.ip.dummynet.codel.interval=150000",
        "sysctl net.inet.ip.dummynet.pie.target=20000",
        "sysctl net.inet.ip.dummynet.pie.alpha=250",
        "sysctl net.inet.ip.dummynet.pie.max_ecnth=500",
        "pipe 1 config codel ecn",
        "pipe 2 config codel target 5",
        "pipe 3 config pie beta 2",
    ]);
    let shown = format_pipes(&e.snapshot(), &[]);
    for want in [
        "AQM CoDel target 7ms interval 150ms ECN",
        "AQM CoDel target 5ms interval 150ms NoECN",
        "AQM type PIE target 20ms tupdate 15ms alpha 0.25 beta 2 max_burst 150ms max_ecnth 0.5",
        "AQM CoDel target 5ms interval 100ms NoECN",
    ] {
        assert_eq!(shown.matches(want).count(), 1, "{want} in\n{shown}");
    }

    // Every plug-in sysctl parses, in FreeBSD's units, and is refused out
    // of its range.
    for t in dummynet_engine::plugin::tunables() {
        let line = format!("sysctl {}={}", t.full_name(), t.max);
        let p = parse_command(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let want = Setting::Tunable {
            sysctl: t.sysctl,
            value: t.max,
        };
        assert_eq!(p.statement, Statement::Apply(Command::Set(want)), "{line}");
        let line = format!("sysctl {}={}", t.full_name(), t.max + 1);
        assert_eq!(err(&line).kind, ErrorKind::Range, "{line}");
    }
    for (line, bad) in [
        ("codel.target=6000000", "6000000"),
        ("codel.target=0", "0"),
        ("pie.alpha=7001", "7001"),
        ("pie.target=5ms", "5ms"),
        ("fqcodel.flows=65537", "65537"),
    ] {
        let line = format!("sysctl net.inet.ip.dummynet.{line}");
        let e = err(&line);
        assert_eq!(e.found(), Some(bad), "{line}: {e}");
    }
    let e = err("sysctl net.inet.ip.dummynet.codel.targte=5000");
    assert_eq!(e.suggestion, Some("net.inet.ip.dummynet.codel.target"));
}

#[test]
fn errors_point_at_the_word_at_fault() {
    // (line, the text the error points at, kind, words the message must hold)
    let cases: &[(&str, &str, ErrorKind, &[&str])] = &[
        (
            "pipe 1 config codel target 5parsecs",
            "5parsecs",
            ErrorKind::Syntax,
            &["target", "ms", "us"],
        ),
        (
            "pipe 1 config pie tupdate 15 foo",
            "foo",
            ErrorKind::Syntax,
            &["pie parameter", "max_ecnth", "pipe option"],
        ),
        (
            "queue 1 config codel ecn bogus",
            "bogus",
            ErrorKind::Syntax,
            &["codel parameter", "interval", "queue option"],
        ),
        (
            "pipe 1 config pie max_ecnth 1.5",
            "1.5",
            ErrorKind::Range,
            &["max_ecnth", "1"],
        ),
        (
            "pipe 1 config pie alpha fast",
            "fast",
            ErrorKind::Syntax,
            &["alpha", "decimal"],
        ),
        (
            "pipe 1 config pie beta 8",
            "8",
            ErrorKind::Range,
            &["beta", "7"],
        ),
        (
            "pipe 1 config red 0.002/5/15",
            "0.002/5/15",
            ErrorKind::Syntax,
            &["w_q/min_th/max_th/max_p", "3 values"],
        ),
        (
            "pipe 1 config red 0/5/15/0.1",
            "0",
            ErrorKind::Range,
            &["red", "w_q"],
        ),
        (
            "pipe 1 config gred 0.002/5x/15/0.1",
            "5x",
            ErrorKind::Syntax,
            &["gred", "min_th", "K"],
        ),
        (
            "pipe 1 config red 0.002/5/15/1.5",
            "1.5",
            ErrorKind::Range,
            &["max_p"],
        ),
        (
            "pipe 1 config red 0.002//15/0.1",
            "",
            ErrorKind::Syntax,
            &["min_th"],
        ),
        (
            "pipe 1 config ecn",
            "ecn",
            ErrorKind::Syntax,
            &["red", "codel ecn"],
        ),
        (
            "pipe 1 config ecn codel",
            "ecn",
            ErrorKind::Syntax,
            &["codel ecn"],
        ),
        (
            "sched 1 config pie",
            "pie",
            ErrorKind::Syntax,
            &["queue option"],
        ),
    ];
    for &(line, at, kind, words) in cases {
        let e = err(line);
        assert_eq!(e.kind, kind, "{line}: {e}");
        if at.is_empty() {
            assert_eq!(e.len, 0, "{line}: {e}");
        } else {
            assert_eq!(e.found(), Some(at), "{line}: {e}");
            assert_eq!(&line[e.offset..e.offset + e.len], at, "{line}");
        }
        for w in words {
            assert!(e.message.contains(w), "{line}: `{w}` not in: {e}");
        }
    }
    // A missing value says what was expected at the end of the line.
    for line in [
        "pipe 1 config codel target",
        "pipe 1 config pie max_burst",
        "pipe 1 config red",
    ] {
        let e = err(line);
        assert!(e.message.contains("found end of line"), "{line}: {e}");
        assert_eq!(e.offset, line.len(), "{line}");
    }
    // A near miss gets a suggestion.
    assert_eq!(
        err("pipe 1 config codel tarket 5").suggestion,
        Some("target")
    );
    assert_eq!(
        err("pipe 1 config pie tupdat 5").suggestion,
        Some("tupdate")
    );
}

/// What the engine refuses (FreeBSD's limits, checked on apply) leaves the
/// configuration as it was.
#[test]
fn a_refused_aqm_changes_nothing() {
    let mut e: Engine<u64> = Engine::new(1);
    let apply = |e: &mut Engine<u64>, line: &str| {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        e.apply(0, c)
    };
    apply(&mut e, "pipe 1 config bw 1Mbit/s codel target 7").unwrap();
    let before = format_pipes(&e.snapshot(), &[]);
    for line in [
        "pipe 1 config red 0.002/20/10/0.1",
        "pipe 1 config gred 0.002/5/0/0.1",
        "sysctl net.inet.ip.dummynet.codel.target=0",
    ] {
        let refused = match parse_command(line) {
            Ok(_) => apply(&mut e, line).is_err(),
            Err(_) => true,
        };
        assert!(refused, "{line}");
        assert_eq!(format_pipes(&e.snapshot(), &[]), before, "{line}");
    }
    assert_eq!(e.settings(), &Settings::default());
    // Times FreeBSD's kernel bounds are taken, brought within the bounds,
    // with a note.
    for (line, note) in [
        (
            "pipe 1 config codel target 6s",
            "codel target 6s is above 5s",
        ),
        (
            "pipe 1 config pie tupdate 11s",
            "pie tupdate 11s is above 10s",
        ),
    ] {
        apply(&mut e, line).unwrap();
        let notes: Vec<String> = e.take_notes().iter().map(ToString::to_string).collect();
        assert!(
            notes.len() == 1 && notes[0].starts_with(note),
            "{line}: {notes:?}"
        );
    }
}

/// `fqcodel.*` / `fqpie.*` fill what `type fq_codel` / `type fq_pie` leave
/// out when the engine applies the command; what the command gives wins.
#[test]
fn sysctls_fill_what_fq_schedulers_leave_out() {
    let params = |line: &str| match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(Command::ConfigSched(_, c))) => c.params,
        other => panic!("{line}: {other:?}"),
    };
    // The language gives only what is written; PIE's fractions as decimals.
    assert_eq!(
        params("sched 1 config type fq_pie alpha 0.25 max_ecnth 0.2"),
        vec![
            ("alpha".to_string(), to_ppb(0.25)),
            ("max_ecnth".to_string(), to_ppb(0.2))
        ]
    );
    let e = err("sched 1 config type fq_pie beta 7.5");
    assert_eq!((e.kind, e.found()), (ErrorKind::Range, Some("7.5")));
    assert_eq!(params("sched 1 config bw 1Mbit/s"), vec![]);

    let e = applied(&[
        "sysctl net.inet.ip.dummynet.fqcodel.quantum=2000",
        "sysctl net.inet.ip.dummynet.fqcodel.target=7000",
        "sysctl net.inet.ip.dummynet.fqpie.flows=64",
        "sysctl net.inet.ip.dummynet.fqpie.alpha=250",
        "pipe 1 config bw 1Mbit/s",
        "sched 1 config type fq_codel target 9",
        "pipe 2 config bw 1Mbit/s",
        "sched 2 config type fq_pie beta 2",
    ]);
    let shown = format_scheds(&e.snapshot(), &[]);
    for want in [
        " FQ_CODEL target 9ms interval 100ms quantum 2000 limit 10240 flows 1024 NoECN",
        "  FQ_PIE target 15ms tupdate 15ms alpha 0.25 beta 2 max_burst 150ms max_ecnth 0.1 \
         quantum 1514 limit 10240 flows 64",
    ] {
        assert!(shown.contains(want), "{want} in\n{shown}");
    }
}
