//! Queue management on `pipe`/`queue config`: every AQM option into its
//! config, the settings that change omitted values, and errors that point
//! at the word at fault.

mod common;

use common::err;

use dummynet_engine::config::{
    AqmConfig, CodelConfig, Command, FlowsetConfig, PieConfig, QueueLimit, RedConfig, Setting,
    Settings,
};
use dummynet_engine::time::{NS_PER_MS, NS_PER_US};
use dummynet_engine::Engine;
use dummynet_lang::{
    format_pipes, parse_command, parse_command_with, parse_file, ErrorKind, Statement,
};

const MS: u64 = NS_PER_MS;

fn flowset(line: &str) -> FlowsetConfig {
    match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(Command::ConfigPipe(_, c))) => c.flowset,
        Ok(Statement::Apply(Command::ConfigQueue(_, c))) => c.flowset,
        other => panic!("{line}: {other:?}"),
    }
}

fn aqm(line: &str) -> AqmConfig {
    flowset(line).aqm
}

fn red(w_q: f64, min_th: u64, max_th: u64, max_p: f64, ecn: bool) -> RedConfig {
    RedConfig {
        w_q,
        min_th,
        max_th,
        max_p,
        ecn,
    }
}

#[test]
fn droptail_is_the_default_and_can_be_asked_for() {
    assert_eq!(aqm("pipe 1 config bw 1Mbit/s"), AqmConfig::DropTail);
    assert_eq!(aqm("pipe 1 config codel droptail"), AqmConfig::DropTail);
    assert_eq!(aqm("queue 1 config pipe 1 droptail"), AqmConfig::DropTail);
}

#[test]
fn red_and_gred() {
    assert_eq!(
        aqm("pipe 1 config red 0.002/5/15/0.1"),
        AqmConfig::Red(red(0.002, 5, 15, 0.1, false))
    );
    assert_eq!(
        aqm("queue 2 config pipe 1 gred 0.5/10/30/1"),
        AqmConfig::Gred(red(0.5, 10, 30, 1.0, false))
    );
    // Thresholds in bytes when the queue is in bytes; K is x1024, as in ipfw.
    let fs = flowset("pipe 1 config queue 100KB gred 0.005/10K/30k/0.2");
    assert_eq!(fs.limit, QueueLimit::Bytes(100 * 1024));
    assert_eq!(
        fs.aqm,
        AqmConfig::Gred(red(0.005, 10240, 30720, 0.2, false))
    );
    // `ecn` is the flowset's flag, before or after `red`.
    for line in [
        "pipe 1 config red 0.002/5/15/0.1 ecn",
        "pipe 1 config ecn red 0.002/5/15/0.1",
    ] {
        assert_eq!(
            aqm(line),
            AqmConfig::Red(red(0.002, 5, 15, 0.1, true)),
            "{line}"
        );
    }
}

#[test]
fn codel_options() {
    let c = |target, interval, ecn| {
        AqmConfig::Codel(CodelConfig {
            target,
            interval,
            ecn,
        })
    };
    assert_eq!(aqm("pipe 1 config codel"), c(5 * MS, 100 * MS, false));
    assert_eq!(
        aqm("pipe 1 config codel target 7 interval 160 ecn"),
        c(7 * MS, 160 * MS, true)
    );
    assert_eq!(
        aqm("pipe 1 config codel interval 1s target 500us ecn noecn"),
        c(500 * NS_PER_US, 1000 * MS, false)
    );
    // The parameters end at the first word that is not one; options go on.
    let fs = flowset("pipe 1 config bw 1Mbit/s codel target 7 queue 100 plr 0.01");
    assert_eq!(fs.aqm, c(7 * MS, 100 * MS, false));
    assert_eq!(fs.limit, QueueLimit::Slots(100));
}

#[test]
fn pie_options() {
    assert_eq!(
        aqm("pipe 1 config pie"),
        AqmConfig::Pie(PieConfig::default())
    );
    let all = "pipe 1 config pie target 20ms tupdate 30 max_burst 100 max_ecnth 0.2 \
               alpha 0.25 beta 2 ecn nocapdrop onoff ts noderand";
    assert_eq!(
        aqm(all),
        AqmConfig::Pie(PieConfig {
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
        })
    );
    let AqmConfig::Pie(p) = aqm("queue 1 config pie ts dre nocapdrop capdrop noderand derand")
    else {
        panic!()
    };
    assert!(p.dre && p.capdrop && p.derand);
}

#[test]
fn sysctls_set_what_codel_and_pie_leave_out() {
    let mut s = Settings::default();
    for line in [
        "sysctl net.inet.ip.dummynet.codel.target=7000",
        "sysctl net.inet.ip.dummynet.codel.interval=150000",
        "sysctl net.inet.ip.dummynet.pie.target=20000",
        "sysctl net.inet.ip.dummynet.pie.alpha=250",
        "sysctl net.inet.ip.dummynet.pie.max_ecnth=500",
    ] {
        let Ok(Statement::Apply(Command::Set(x))) = parse_command(line).map(|p| p.statement) else {
            panic!("{line}")
        };
        s.set(x).unwrap();
    }
    let with = |line: &str| match parse_command_with(line, &s).map(|p| p.statement) {
        Ok(Statement::Apply(Command::ConfigPipe(_, c))) => c.flowset.aqm,
        other => panic!("{line}: {other:?}"),
    };
    assert_eq!(
        with("pipe 1 config codel ecn"),
        AqmConfig::Codel(CodelConfig {
            target: 7 * MS,
            interval: 150 * MS,
            ecn: true
        })
    );
    // What the command gives still wins.
    let AqmConfig::Codel(c) = with("pipe 1 config codel target 5") else {
        panic!()
    };
    assert_eq!((c.target, c.interval), (5 * MS, 150 * MS));
    let AqmConfig::Pie(p) = with("pipe 1 config pie beta 2") else {
        panic!()
    };
    assert_eq!(
        (p.target, p.alpha, p.beta, p.max_ecnth, p.tupdate),
        (20 * MS, 0.25, 2.0, 0.5, 15 * MS)
    );

    // Every sysctl of the four groups parses, in FreeBSD's units.
    for (line, want) in [
        ("fqcodel.target=7000", Setting::FqCodelTarget(7 * MS)),
        (
            "fqcodel.interval=150000",
            Setting::FqCodelInterval(150 * MS),
        ),
        ("fqcodel.quantum=2000", Setting::FqCodelQuantum(2000)),
        ("fqcodel.limit=20000", Setting::FqCodelLimit(20000)),
        ("fqcodel.flows=2048", Setting::FqCodelFlows(2048)),
        ("fqpie.target=20000", Setting::FqPieTarget(20 * MS)),
        ("fqpie.tupdate=30000", Setting::FqPieTupdate(30 * MS)),
        ("fqpie.max_burst=100000", Setting::FqPieMaxBurst(100 * MS)),
        ("fqpie.max_ecnth=200", Setting::FqPieMaxEcnth(200)),
        ("fqpie.alpha=250", Setting::FqPieAlpha(250)),
        ("fqpie.beta=2000", Setting::FqPieBeta(2000)),
        ("fqpie.quantum=1500", Setting::FqPieQuantum(1500)),
        ("fqpie.limit=1000", Setting::FqPieLimit(1000)),
        ("fqpie.flows=64", Setting::FqPieFlows(64)),
        ("pie.tupdate=30000", Setting::PieTupdate(30 * MS)),
        ("pie.max_burst=100000", Setting::PieMaxBurst(100 * MS)),
        ("pie.beta=2000", Setting::PieBeta(2000)),
    ] {
        let line = format!("sysctl net.inet.ip.dummynet.{line}");
        let p = parse_command(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(p.statement, Statement::Apply(Command::Set(want)), "{line}");
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
}

#[test]
fn a_commands_file_follows_its_own_sysctls() {
    let text = "\
pipe 1 config codel
sysctl net.inet.ip.dummynet.codel.target=8000
pipe 2 config codel
";
    let parsed = parse_file(text, None).unwrap();
    let targets: Vec<u64> = parsed
        .iter()
        .filter_map(|(_, p)| match &p.statement {
            Statement::Apply(Command::ConfigPipe(_, c)) => match &c.flowset.aqm {
                AqmConfig::Codel(c) => Some(c.target),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(targets, vec![5 * MS, 8 * MS]);
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
        "pipe 1 config codel target 6s",
        "pipe 1 config pie tupdate 11s",
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
    assert_eq!(e.settings(), Settings::default());
}

/// `fqcodel.*` / `fqpie.*` fill what `type fq_codel` / `type fq_pie` leave
/// out; what the command gives wins.
#[test]
fn sysctls_set_what_fq_schedulers_leave_out() {
    let mut s = Settings::default();
    for x in [
        Setting::FqCodelQuantum(2000),
        Setting::FqCodelTarget(7 * MS),
        Setting::FqPieFlows(64),
    ] {
        s.set(x).unwrap();
    }
    let params = |line: &str| match parse_command_with(line, &s).map(|p| p.statement) {
        Ok(Statement::Apply(Command::ConfigSched(_, c))) => c.params,
        other => panic!("{line}: {other:?}"),
    };
    if dummynet_engine::sched::lookup("fq_codel").is_some() {
        let p = params("sched 1 config type fq_codel target 9");
        assert!(p.contains(&("target".into(), 9 * MS)), "{p:?}");
        assert!(p.contains(&("quantum".into(), 2000)), "{p:?}");
        assert!(p.contains(&("flows".into(), 1024)), "{p:?}");
    }
    if dummynet_engine::sched::lookup("fq_pie").is_some() {
        let p = params("sched 1 config type fq_pie");
        assert!(p.contains(&("flows".into(), 64)), "{p:?}");
        assert!(p.contains(&("target".into(), 15 * MS)), "{p:?}");
        // PIE's fractions, written as decimals, travel in thousandths.
        let p = params("sched 1 config type fq_pie alpha 0.25 max_ecnth 0.2");
        for (k, v) in [("alpha", 250), ("max_ecnth", 200), ("beta", 1250)] {
            assert!(p.contains(&(k.into(), v)), "{k}: {p:?}");
        }
        let e = err("sched 1 config type fq_pie beta 7.5");
        assert_eq!((e.kind, e.found()), (ErrorKind::Range, Some("7.5")));
    }
    // Without a type there is nothing to fill.
    assert_eq!(params("sched 1 config bw 1Mbit/s"), vec![]);
}
