//! netem's and mahimahi's impairments (`jitter`, `reorder`, `overhead`,
//! `slot`, `trace`, `loss`, `duplicate`, `corrupt`), `modify`, and `at`
//! on a command line: what each parses to, defaults included, and where
//! each mistake is pointed.

mod common;

use common::{apply, err, link, pipe};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dummynet_engine::config::{
    Command, Correlated, Corrupt, Distribution, Duplicate, Field, Fields, FlowsetConfig, Jitter,
    LossModel, Overhead, QueueConfig, Reorder, SchedConfig, Schedule, Slot, Trace, TraceMode,
};
use dummynet_engine::impair::dist;
use dummynet_engine::rng::Probability;
use dummynet_engine::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};
use dummynet_lang::{parse_args_in, parse_command, ErrorKind, ParseError, Statement};

const MS: u64 = NS_PER_MS;

fn flowset(line: &str) -> FlowsetConfig {
    pipe(line).flowset
}

/// Asserts that `line` fails at `found` (1-based `column`) with `kind`,
/// and that the message says `says`.
#[track_caller]
fn fails(line: &str, kind: ErrorKind, found: Option<&str>, column: usize, says: &str) {
    let e = err(line);
    assert_eq!((e.kind, e.found(), e.column), (kind, found, column), "{e}");
    assert!(e.message.contains(says), "{line}: {e}");
}

fn p(x: f64) -> Probability {
    Probability::new(x).unwrap()
}

fn corr(pr: f64, c: f64) -> Correlated {
    Correlated::new(p(pr), p(c))
}

fn jitter(amount: u64) -> Jitter {
    Jitter {
        amount,
        correlation: Probability::ZERO,
        distribution: Distribution::Uniform,
        unordered: false,
    }
}

/// A file of our own in the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str, text: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "dummynet-lang-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn dir(&self) -> &Path {
        self.0.parent().unwrap()
    }

    fn name(&self) -> &str {
        self.0.file_name().unwrap().to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `line` with `{}` replaced by the file's name, parsed relative to its
/// directory, as the daemon parses a client's command.
fn parse_in(line: &str, f: &TempFile) -> Result<Command, ParseError> {
    let words: Vec<String> = line
        .replace("{}", f.name())
        .split_whitespace()
        .map(String::from)
        .collect();
    match parse_args_in(&words, Some(f.dir()))?.statement {
        Statement::Apply(c) => Ok(c),
        other => panic!("{line}: {other:?}"),
    }
}

// ---------------------------------------------------------------- jitter

#[test]
fn jitter_keyword_and_netem_positional_forms() {
    let l = link("pipe 1 config delay 10ms jitter 5ms");
    assert_eq!((l.delay, &l.jitter), (10 * MS, &Some(jitter(5 * MS))));
    assert_eq!(link("pipe 1 config jitter 5ms delay 10ms"), l);
    // netem's `delay T J`: a time right after the delay is the jitter.
    let l = link("pipe 1 config delay 100ms 10ms");
    assert_eq!((l.delay, &l.jitter), (100 * MS, &Some(jitter(10 * MS))));
    assert_eq!(link("pipe 1 config delay 100 10"), l, "bare numbers are ms");
    // ... and a percentage after that its correlation.
    let l = link("pipe 1 config delay 100ms 10ms 25% distribution uniform unordered bw 1Mbit/s");
    let expected = Jitter {
        correlation: p(0.25),
        unordered: true,
        ..jitter(10 * MS)
    };
    assert_eq!((l.jitter, l.bw), (Some(expected.clone()), 1_000_000));
    assert_eq!(
        link("pipe 1 config delay 100ms jitter 10ms corr 0.25 unordered bw 1Mbit/s").jitter,
        Some(expected.clone())
    );
    assert_eq!(
        link("pipe 1 config delay 100ms jitter 10ms unordered correlation 25% bw 1Mbit/s").jitter,
        Some(expected)
    );
    // Jitter alone is allowed: around a delay of 0.
    let l = link("pipe 1 config jitter 1.5s");
    assert_eq!((l.delay, l.jitter), (0, Some(jitter(3 * NS_PER_SEC / 2))));
    assert_eq!(
        link("pipe 1 config jitter 500us").jitter,
        Some(jitter(500 * NS_PER_US))
    );
    // A plain delay has none, and a new `config` starts from none.
    assert_eq!(link("pipe 1 config delay 10ms bw 1Mbit/s").jitter, None);
    assert_eq!(link("pipe 1 config").jitter, None);
}

#[test]
fn jitter_errors_point_at_the_value() {
    use ErrorKind::*;
    fails(
        "pipe 1 config jitter -5ms",
        Range,
        Some("-5ms"),
        22,
        "cannot be negative",
    );
    fails(
        "pipe 1 config delay 10 -5ms",
        Range,
        Some("-5ms"),
        24,
        "`jitter` cannot be negative",
    );
    fails(
        "pipe 1 config jitter soon",
        Syntax,
        Some("soon"),
        22,
        "such as 5ms",
    );
    fails(
        "pipe 1 config jitter",
        Syntax,
        None,
        21,
        "found end of line",
    );
    fails(
        "pipe 1 config delay 10ms 5ms 150%",
        Range,
        Some("150%"),
        30,
        "between 0 and 1",
    );
    fails(
        "pipe 1 config jitter 5ms correlation x",
        Syntax,
        Some("x"),
        38,
        "correlation:",
    );
    fails(
        "pipe 1 config distribution normal",
        Syntax,
        Some("distribution"),
        15,
        "belongs to `jitter`",
    );
    fails(
        "pipe 1 config delay 10 unordered",
        Syntax,
        Some("unordered"),
        24,
        "belongs to `jitter`",
    );
    let e = err("pipe 1 config delay 10ms jiter 5ms");
    assert_eq!((e.found(), e.suggestion), (Some("jiter"), Some("jitter")));
    // A misspelt jitter parameter is reported as one.
    let e = err("pipe 1 config jitter 5ms corelation 25%");
    assert_eq!(
        (e.found(), e.suggestion),
        (Some("corelation"), Some("correlation"))
    );
    assert!(e.message.contains("a jitter parameter"), "{e}");
}

#[test]
fn distributions_built_in_and_from_files() {
    // `normal`, `pareto` and `paretonormal` are whatever the engine has.
    for name in ["normal", "pareto", "paretonormal"] {
        let line = format!("pipe 1 config delay 10ms jitter 5ms distribution {name}");
        match dist::builtin(name) {
            Some(t) => assert_eq!(
                link(&line).jitter.unwrap().distribution,
                Distribution::Table(t)
            ),
            None => fails(
                &line,
                ErrorKind::Unavailable,
                Some(name),
                50,
                "not available",
            ),
        }
    }
    let table = TempFile::new("dist", "# a tc .dist table\n-8192 0\n8192\n");
    let j = parse_in("pipe 1 config delay 50ms 5ms distribution {}", &table)
        .map(|c| match c {
            Command::ConfigPipe(_, cfg) => cfg.link.jitter.unwrap(),
            other => panic!("{other:?}"),
        })
        .unwrap();
    let Distribution::Table(t) = j.distribution else {
        panic!("{j:?}")
    };
    // Named as typed, so that `show` prints what reads back.
    assert_eq!(
        (t.name.as_str(), t.values.clone()),
        (table.name(), vec![-8192, 0, 8192])
    );

    let e = err("pipe 1 config jitter 5ms distribution nosuch");
    assert_eq!(
        (e.kind, e.found(), e.column),
        (ErrorKind::File, Some("nosuch"), 39)
    );
    assert!(e.message.contains("/usr/lib/tc/nosuch.dist"), "{e}");
    assert!(
        e.message.contains("uniform, normal, pareto, paretonormal"),
        "{e}"
    );
    let e = err("pipe 1 config jitter 5ms distribution normla");
    assert_eq!(e.suggestion, Some("normal"));

    let bad = TempFile::new("dist", "1 2\nthree\n");
    let e = parse_in("pipe 1 config jitter 5ms distribution {}", &bad).unwrap_err();
    assert_eq!((e.kind, e.found()), (ErrorKind::File, Some(bad.name())));
    assert!(e.message.contains("line 2"), "{e}");
}

// ---------------------------------------------------------------- reorder

#[test]
fn reorder_with_defaults_and_gap() {
    let r = |line: &str| link(line).reorder.unwrap();
    assert_eq!(
        r("pipe 1 config delay 10ms reorder 25%"),
        Reorder {
            p: corr(0.25, 0.0),
            gap: 1
        }
    );
    let full = Reorder {
        p: corr(1.0, 0.1),
        gap: 5,
    };
    assert_eq!(
        r("pipe 1 config delay 10ms reorder 100% correlation 10% gap 5"),
        full
    );
    assert_eq!(r("pipe 1 config reorder 1 10% gap 5 delay 10ms"), full);
    assert_eq!(
        r("pipe 1 config delay 10ms reorder 100% gap 5 corr 0.1"),
        full
    );
    // Jitter alone is a delay to overtake.
    assert!(link("pipe 1 config jitter 5ms reorder 10%")
        .reorder
        .is_some());
}

#[test]
fn reorder_errors() {
    use ErrorKind::*;
    fails(
        "pipe 1 config reorder 10%",
        Syntax,
        Some("reorder"),
        15,
        "needs a `delay`",
    );
    fails(
        "pipe 1 config bw 1Mbit/s reorder 10% queue 5",
        Syntax,
        Some("reorder"),
        26,
        "delay",
    );
    fails(
        "pipe 1 config delay 10ms reorder 10% gap 0",
        Range,
        Some("0"),
        42,
        "1..",
    );
    fails(
        "pipe 1 config delay 10ms reorder 10% gap",
        Syntax,
        None,
        41,
        "end of line",
    );
    fails(
        "pipe 1 config delay 10ms reorder often",
        Syntax,
        Some("often"),
        34,
        "reorder:",
    );
    fails(
        "pipe 1 config delay 10ms reorder 101%",
        Range,
        Some("101%"),
        34,
        "between 0 and 1",
    );
    fails(
        "pipe 1 config delay 10ms gap 5",
        Syntax,
        Some("gap"),
        26,
        "belongs to `reorder`",
    );
}

// ---------------------------------------------------------------- overhead

#[test]
fn overhead_and_cells() {
    let o = |line: &str| link(line).overhead.unwrap();
    assert_eq!(
        o("pipe 1 config overhead 24"),
        Overhead {
            bytes: 24,
            cell_size: 0,
            cell_overhead: 0
        }
    );
    assert_eq!(o("pipe 1 config overhead -14 bw 1Mbit/s").bytes, -14);
    assert_eq!(
        o("pipe 1 config overhead 10 cellsize 48 celloverhead 5"),
        Overhead {
            bytes: 10,
            cell_size: 48,
            cell_overhead: 5
        }
    );
    assert_eq!(
        o("pipe 1 config overhead 0 cellsize 53").cell_size,
        53,
        "a cell without its own overhead"
    );
}

#[test]
fn overhead_errors() {
    use ErrorKind::*;
    fails(
        "pipe 1 config overhead abc",
        Syntax,
        Some("abc"),
        24,
        "whole number of bytes",
    );
    fails(
        "pipe 1 config overhead 70000",
        Range,
        Some("70000"),
        24,
        "-65535..65535",
    );
    fails("pipe 1 config overhead", Syntax, None, 23, "end of line");
    fails(
        "pipe 1 config overhead 10 celloverhead 5",
        Syntax,
        Some("celloverhead"),
        27,
        "`cellsize C` before it",
    );
    fails(
        "pipe 1 config overhead 10 cellsize 0",
        Range,
        Some("0"),
        36,
        "1..65535",
    );
    fails(
        "pipe 1 config overhead 10 cellsize 48 celloverhead -48",
        Range,
        Some("-48"),
        52,
        "leaves nothing",
    );
    fails(
        "pipe 1 config cellsize 48",
        Syntax,
        Some("cellsize"),
        15,
        "belongs to `overhead`",
    );
}

// ---------------------------------------------------------------- slot

#[test]
fn slots() {
    assert_eq!(
        link("pipe 1 config slot 10ms").slot,
        Some(Slot {
            min: 10 * MS,
            max: 10 * MS,
            packets: None,
            bytes: None
        })
    );
    assert_eq!(
        link("pipe 1 config slot 10ms 20ms packets 4 bytes 64KB bw 1Mbit/s").slot,
        Some(Slot {
            min: 10 * MS,
            max: 20 * MS,
            packets: Some(4),
            bytes: Some(65_536)
        })
    );
    assert_eq!(
        link("pipe 1 config slot 0 5 bytes 1500").slot,
        Some(Slot {
            min: 0,
            max: 5 * MS,
            packets: None,
            bytes: Some(1500)
        })
    );
}

#[test]
fn slot_errors() {
    use ErrorKind::*;
    fails(
        "pipe 1 config slot 20ms 10ms",
        Range,
        Some("10ms"),
        25,
        "below MIN `20ms`",
    );
    fails(
        "pipe 1 config slot 0",
        Range,
        Some("0"),
        20,
        "spacing above 0",
    );
    fails(
        "pipe 1 config slot fast",
        Syntax,
        Some("fast"),
        20,
        "`slot`",
    );
    fails(
        "pipe 1 config slot 10ms packets 0",
        Range,
        Some("0"),
        33,
        "1..",
    );
    fails(
        "pipe 1 config slot 10ms bytes 0",
        Range,
        Some("0"),
        31,
        "at least 1",
    );
    fails(
        "pipe 1 config slot 10ms bytes 1Mbit",
        Syntax,
        Some("1Mbit"),
        31,
        "size in bytes",
    );
    fails(
        "pipe 1 config packets 4",
        Syntax,
        Some("packets"),
        15,
        "belongs to `slot`",
    );
}

// ---------------------------------------------------------------- trace

#[test]
fn traces_are_read_relative_to_the_base_dir() {
    let f = TempFile::new("trace", "0\n5\n5\n\n10\n");
    let trace = |line: &str| match parse_in(line, &f).unwrap() {
        Command::ConfigPipe(_, cfg) => cfg.link.trace.unwrap(),
        other => panic!("{other:?}"),
    };
    let expected = Trace {
        name: f.name().to_string(),
        times: vec![0, 5 * MS, 5 * MS, 10 * MS],
        mode: TraceMode::Loop,
    };
    assert_eq!(trace("pipe 1 config trace {}"), Arc::new(expected.clone()));
    assert_eq!(
        trace("pipe 1 config trace {} loop delay 10"),
        Arc::new(expected.clone())
    );
    assert_eq!(trace("pipe 1 config trace {} once").mode, TraceMode::Once);
    // An absolute path needs no base directory, and is the trace's name.
    let path = f.0.display().to_string();
    assert_eq!(
        link(&format!("pipe 1 config trace {path}"))
            .trace
            .unwrap()
            .name,
        path
    );
    // Sched takes link options too.
    let Command::ConfigSched(_, SchedConfig { link: Some(l), .. }) =
        parse_in("sched 1 config trace {} once", &f).unwrap()
    else {
        panic!()
    };
    assert_eq!(l.trace.map(|t| t.mode), Some(TraceMode::Once));
}

#[test]
fn trace_errors() {
    let f = TempFile::new("trace", "0\n5\n");
    let e = err("pipe 1 config trace missing.file");
    assert_eq!(
        (e.kind, e.found(), e.column),
        (ErrorKind::File, Some("missing.file"), 21)
    );
    assert!(e.message.contains("cannot read trace"), "{e}");
    let bad = TempFile::new("trace", "0\n5\n3\n");
    let e = parse_in("pipe 1 config trace {}", &bad).unwrap_err();
    assert_eq!((e.kind, e.found()), (ErrorKind::File, Some(bad.name())));
    assert!(e.message.contains("line 3"), "{e}");
    // `bw` and `trace` in one command: the second one is the mistake.
    let says = "`bw` and `trace` exclude each other: a traced link's rate is its trace";
    fails(
        "pipe 1 config bw 1Mbit/s trace X",
        ErrorKind::Syntax,
        Some("trace"),
        26,
        says,
    );
    let e = parse_in("pipe 1 config trace {} bandwidth 1Mbit/s", &f).unwrap_err();
    assert_eq!(e.found(), Some("bandwidth"));
    assert_eq!(e.message, says);
    let e = parse_in("pipe 1 modify trace {} bw 1Mbit/s", &f).unwrap_err();
    assert_eq!(e.found(), Some("bw"));
    fails(
        "pipe 1 config trace",
        ErrorKind::Syntax,
        None,
        20,
        "trace file name",
    );
    fails(
        "pipe 1 config once",
        ErrorKind::Syntax,
        Some("once"),
        15,
        "belongs to `trace`",
    );
}

// ---------------------------------------------------------------- loss

#[test]
fn random_loss() {
    let random = |pr, c| Some(LossModel::Random(corr(pr, c)));
    assert_eq!(flowset("pipe 1 config loss 1%").loss, random(0.01, 0.0));
    assert_eq!(flowset("pipe 1 config loss 0.01").loss, random(0.01, 0.0));
    assert_eq!(
        flowset("pipe 1 config loss 1% 25%").loss,
        random(0.01, 0.25)
    );
    assert_eq!(
        flowset("pipe 1 config loss random 1% correlation 25% queue 10").loss,
        random(0.01, 0.25)
    );
    assert_eq!(
        flowset("pipe 1 config loss 0.5% corr 0.25").loss,
        random(0.005, 0.25)
    );
    assert_eq!(flowset("pipe 1 config plr 0.1").loss, None);
}

#[test]
fn gilbert_elliott_with_tc_defaults() {
    let ge = |line: &str| flowset(line).loss.unwrap();
    let model = |pr, r, h, k| LossModel::GilbertElliott {
        p: p(pr),
        r: p(r),
        loss_bad: p(h),
        loss_good: p(k),
    };
    // tc: r = 1 − p, 1-h = 100%, 1-k = 0%.
    assert_eq!(
        ge("pipe 1 config loss gemodel 1%"),
        model(0.01, 0.99, 1.0, 0.0)
    );
    assert_eq!(
        ge("pipe 1 config loss gemodel 1% 30%"),
        model(0.01, 0.3, 1.0, 0.0)
    );
    assert_eq!(
        ge("pipe 1 config loss gemodel 1% 30% 90%"),
        model(0.01, 0.3, 0.9, 0.0)
    );
    assert_eq!(
        ge("pipe 1 config loss gemodel 1% 30% 90% 0.1% queue 20"),
        model(0.01, 0.3, 0.9, 0.001)
    );
}

#[test]
fn four_state_with_tc_defaults() {
    let st = |line: &str| flowset(line).loss.unwrap();
    let model = |p13, p31, p32, p23, p14| LossModel::FourState {
        p13: p(p13),
        p31: p(p31),
        p32: p(p32),
        p23: p(p23),
        p14: p(p14),
    };
    // tc: p31 = 1 − p13, p32 = 0, p23 = 100%, p14 = 0.
    assert_eq!(
        st("pipe 1 config loss state 1%"),
        model(0.01, 0.99, 0.0, 1.0, 0.0)
    );
    assert_eq!(
        st("pipe 1 config loss state 1% 50%"),
        model(0.01, 0.5, 0.0, 1.0, 0.0)
    );
    assert_eq!(
        st("pipe 1 config loss state 1% 50% 2% 80% 0.1%"),
        model(0.01, 0.5, 0.02, 0.8, 0.001)
    );
}

#[test]
fn loss_errors() {
    use ErrorKind::*;
    fails(
        "pipe 1 config loss 150%",
        Range,
        Some("150%"),
        20,
        "between 0 and 1",
    );
    fails(
        "pipe 1 config loss 25",
        Range,
        Some("25"),
        20,
        "write `25%`",
    );
    fails(
        "pipe 1 config loss -1%",
        Syntax,
        Some("-1%"),
        20,
        "such as 0.05 or 5%",
    );
    fails("pipe 1 config loss", Syntax, None, 19, "after `loss`");
    fails(
        "pipe 1 config loss gemodel",
        Syntax,
        None,
        27,
        "after `loss gemodel`",
    );
    fails(
        "pipe 1 config loss state",
        Syntax,
        None,
        25,
        "after `loss state`",
    );
    fails(
        "pipe 1 config loss state 1% 2% 3% 4% 5% 6%",
        Syntax,
        Some("6%"),
        41,
        "at most 5 probabilities (P13 P31 P32 P23 P14)",
    );
    fails(
        "pipe 1 config loss gemodel 1% 2% 3% 4% 5%",
        Syntax,
        Some("5%"),
        40,
        "at most 4 probabilities (P R 1-H 1-K)",
    );
    fails(
        "pipe 1 config loss gemodel 1% 200%",
        Range,
        Some("200%"),
        31,
        "loss gemodel:",
    );
    let e = err("pipe 1 config loss gemodle 1%");
    assert_eq!(
        (e.found(), e.suggestion),
        (Some("gemodle"), Some("gemodel"))
    );
    fails(
        "pipe 1 config loss 1% gap 3",
        Syntax,
        Some("gap"),
        23,
        "belongs to `reorder`",
    );
    let e = err("pipe 1 config loss 1% corelation 3%");
    assert_eq!(e.suggestion, Some("correlation"));
    fails(
        "pipe 1 config gemodel 1%",
        Syntax,
        Some("gemodel"),
        15,
        "is a loss model",
    );
}

// ---------------------------------------------------------------- duplicate, corrupt

#[test]
fn duplicate_and_corrupt() {
    let fs = flowset("pipe 1 config duplicate 1% corrupt 0.1% 25%");
    assert_eq!(
        (fs.duplicate, fs.corrupt),
        (
            Some(Duplicate(corr(0.01, 0.0))),
            Some(Corrupt(corr(0.001, 0.25)))
        )
    );
    let fs = flowset("pipe 1 config corrupt 0.1% correlation 25% duplicate 0.02 corr 10%");
    assert_eq!(
        (fs.duplicate, fs.corrupt),
        (
            Some(Duplicate(corr(0.02, 0.1))),
            Some(Corrupt(corr(0.001, 0.25)))
        )
    );
    use ErrorKind::*;
    fails(
        "pipe 1 config duplicate",
        Syntax,
        None,
        24,
        "after `duplicate`",
    );
    fails("pipe 1 config corrupt 2", Range, Some("2"), 23, "corrupt:");
    fails(
        "pipe 1 config duplicate 1% correlation",
        Syntax,
        None,
        39,
        "after `correlation`",
    );
    fails(
        "pipe 1 config correlation 5%",
        Syntax,
        Some("correlation"),
        15,
        "follows the value",
    );
}

#[test]
fn impairments_go_to_the_object_that_has_them() {
    let QueueConfig { flowset: fs, .. } =
        match apply("queue 1 config loss 1% duplicate 2% corrupt 3%") {
            Command::ConfigQueue(1, cfg) => cfg,
            other => panic!("{other:?}"),
        };
    assert_eq!(fs.loss, Some(LossModel::Random(corr(0.01, 0.0))));
    assert_eq!(
        (fs.duplicate, fs.corrupt),
        (
            Some(Duplicate(corr(0.02, 0.0))),
            Some(Corrupt(corr(0.03, 0.0)))
        )
    );
    let Command::ConfigSched(1, s) = apply("sched 1 config delay 10ms 2ms reorder 5% overhead 24")
    else {
        panic!()
    };
    let l = s.link.unwrap();
    assert_eq!(
        (l.delay, l.jitter.map(|j| j.amount)),
        (10 * MS, Some(2 * MS))
    );
    assert_eq!(l.overhead.map(|o| o.bytes), Some(24));
    assert!(l.reorder.is_some());
    fails(
        "sched 1 config reorder 5%",
        ErrorKind::Syntax,
        Some("reorder"),
        16,
        "delay",
    );
    for (line, word, hint) in [
        ("queue 1 config jitter 5ms", "jitter", "is a link option"),
        ("queue 1 config slot 5ms", "slot", "is a link option"),
        ("sched 1 config loss 1%", "loss", "is a queue option"),
        ("sched 1 config corrupt 1%", "corrupt", "is a queue option"),
    ] {
        let e = err(line);
        assert_eq!(e.found(), Some(word), "{e}");
        assert!(e.message.contains(hint), "{e}");
    }
    // Near misses of every new option get their suggestion.
    for (line, fix) in [
        ("pipe 1 config reordr 5%", "reorder"),
        ("pipe 1 config overhaed 5", "overhead"),
        ("pipe 1 config duplicte 1%", "duplicate"),
        ("pipe 1 config corupt 1%", "corrupt"),
        ("queue 1 config los 1%", "loss"),
        ("sched 1 config jiter 5ms", "jitter"),
        ("sched 1 config trce x", "trace"),
    ] {
        assert_eq!(err(line).suggestion, Some(fix), "{line}");
    }
}

#[test]
fn percentages_also_for_plr_and_prob() {
    assert_eq!(flowset("pipe 1 config plr 5%").plr, p(0.05));
    assert_eq!(flowset("pipe 1 config plr 0.05").plr, p(0.05));
    let Command::AddRule(r) = apply("add prob 50% allow ip from any to any") else {
        panic!()
    };
    assert_eq!(r.prob, Some(p(0.5)));
    // Printed as ipfw prints it, so the rule reads back the same.
    assert_eq!(
        dummynet_lang::format_rule_body(&r),
        "prob 0.500000 allow ip from any to any"
    );
}

// ---------------------------------------------------------------- modify

fn fields(f: &[Field]) -> Fields {
    f.iter().copied().collect()
}

#[test]
fn modify_names_the_groups_given() {
    let Command::ModifyPipe(1, cfg, f) = apply("pipe 1 modify bw 1Mbit/s") else {
        panic!()
    };
    assert_eq!((cfg.link.bw, f), (1_000_000, fields(&[Field::Bw])));
    let Command::ModifyPipe(1, cfg, f) = apply("pipe 1 modify delay 100ms 10ms") else {
        panic!()
    };
    assert_eq!(f, fields(&[Field::Delay, Field::Jitter]));
    assert_eq!(cfg.link.jitter, Some(jitter(10 * MS)));
    let Command::ModifyPipe(_, _, f) = apply(
        "pipe 1 modify queue 20 red 0.002/5/15/0.1 ecn plr 0.1 loss 1% burst 1k jitter 1ms \
         reorder 5% overhead 4 slot 1ms duplicate 1% corrupt 1% mask all buckets 8 noerror \
         weight 2 lmax 1500 pri 3",
    ) else {
        panic!()
    };
    use Field::*;
    assert_eq!(
        f,
        fields(&[
            Limit, Aqm, Plr, Loss, Burst, Jitter, Reorder, Overhead, Slot, Duplicate, Corrupt,
            Mask, Buckets, Noerror, Weight, Lmax, Pri
        ])
    );
    // No delay needed: the pipe may have one already.
    let Command::ModifyPipe(_, cfg, f) = apply("pipe 1 modify reorder 10%") else {
        panic!()
    };
    assert_eq!((cfg.link.reorder.is_some(), f), (true, fields(&[Reorder])));

    let Command::ModifyQueue(1, cfg, f) = apply("queue 1 modify weight 5 sched 2") else {
        panic!()
    };
    assert_eq!(
        (cfg.sched, cfg.flowset.weight, f),
        (Some(2), 5, fields(&[Weight, Sched]))
    );
    let Command::ModifyQueue(_, _, f) = apply("queue 1 modify pipe 3 codel") else {
        panic!()
    };
    assert_eq!(f, fields(&[Sched, Aqm]));
}

#[test]
fn sched_modify_without_type_takes_any_types_parameters() {
    let Command::ModifySched(1, cfg, f) = apply("sched 1 modify quantum 3000") else {
        panic!()
    };
    // Only what was given: the engine fills defaults when it applies it.
    assert_eq!(
        cfg,
        SchedConfig {
            params: vec![("quantum".into(), 3000)],
            ..SchedConfig::default()
        }
    );
    assert_eq!(f, fields(&[Field::Params]));
    let Command::ModifySched(_, cfg, _) =
        apply("sched 1 modify target 10ms alpha 0.2 noecn lmax 1500")
    else {
        panic!()
    };
    assert_eq!(
        cfg.params,
        vec![
            ("target".into(), 10 * MS),
            ("alpha".into(), 200_000_000),
            ("ecn".into(), 0),
            ("lmax".into(), 1500)
        ]
    );
    // With a type, its parameters, as `config` has them.
    let Command::ModifySched(_, cfg, f) = apply("sched 1 modify type fq_codel quantum 3000") else {
        panic!()
    };
    let Command::ConfigSched(_, full) = apply("sched 1 config type fq_codel quantum 3000") else {
        panic!()
    };
    assert_eq!(cfg, full);
    assert_eq!(f, fields(&[Field::Type, Field::Params]));
    fails(
        "sched 1 modify type fifo quantum 5",
        ErrorKind::Syntax,
        Some("quantum"),
        26,
        "`fifo` takes no parameters",
    );
    // Link options go in `link` and are named.
    let Command::ModifySched(_, cfg, f) = apply("sched 1 modify bw 1Mbit/s mask dst-ip 0xff")
    else {
        panic!()
    };
    assert_eq!(cfg.link.map(|l| l.bw), Some(1_000_000));
    assert_eq!(f, fields(&[Field::Bw, Field::Mask]));
    let e = err("sched 1 modify quantm 5");
    assert_eq!((e.found(), e.suggestion), (Some("quantm"), Some("quantum")));
}

#[test]
fn modify_errors() {
    use ErrorKind::*;
    fails(
        "pipe 1 modify",
        Syntax,
        None,
        14,
        "an option to change after `pipe 1 modify`",
    );
    fails(
        "sched 2 modify pipe 2",
        Syntax,
        None,
        22,
        "an option to change",
    );
    fails(
        "pipe modify bw 1",
        Syntax,
        Some("modify"),
        6,
        "`pipe modify` needs a number",
    );
    let e = err("pipe 1 modfy bw 1");
    assert_eq!((e.found(), e.suggestion), (Some("modfy"), Some("modify")));
    assert!(
        e.message.contains("`config`, `modify`, `delete` or `show`"),
        "{e}"
    );
    fails(
        "queue 1 modify delay 5",
        Syntax,
        Some("delay"),
        16,
        "is a link option",
    );
}

// ---------------------------------------------------------------- at

#[test]
fn at_on_a_command_line_is_one_step() {
    let Command::ModifyPipe(..) = apply("pipe 1 modify bw 2Mbit/s") else {
        panic!()
    };
    let step = apply("pipe 1 modify bw 2Mbit/s");
    for line in [
        "ipfw at 30s pipe 1 modify bw 2Mbit/s",
        "at 30000ms pipe 1 modify bw 2Mbit/s",
        "at 0.5min ipfw pipe 1 modify bw 2Mbit/s",
    ] {
        assert_eq!(
            apply(line),
            Command::Schedule(Schedule {
                steps: vec![(30 * NS_PER_SEC, step.clone())],
                every: None
            }),
            "{line}"
        );
    }
    let words: Vec<String> = "-q at 1h flush".split(' ').map(String::from).collect();
    let parsed = parse_args_in(&words, None).unwrap();
    assert!(parsed.flags.quiet);
    assert_eq!(
        parsed.statement,
        Statement::Apply(Command::Schedule(Schedule {
            steps: vec![(3600 * NS_PER_SEC, Command::FlushRules)],
            every: None
        }))
    );
    // A pasted root prompt before `at`, but not a comment that starts with it.
    assert!(matches!(
        parse_command("# at 5s pipe 1 delete").unwrap().statement,
        Statement::Apply(Command::Schedule(_))
    ));
    assert!(matches!(
        parse_command("# at least one pipe").unwrap().statement,
        Statement::Nop(_)
    ));
}

#[test]
fn at_errors() {
    use ErrorKind::*;
    fails(
        "at 5 pipe 1 delete",
        Syntax,
        Some("5"),
        4,
        "bare number could mean seconds",
    );
    fails(
        "at soon pipe 1 delete",
        Syntax,
        Some("soon"),
        4,
        "such as 5s",
    );
    fails(
        "at 5s show",
        Syntax,
        Some("show"),
        7,
        "`show` cannot be scheduled",
    );
    fails(
        "at 5s pipe 1 show",
        Syntax,
        Some("show"),
        14,
        "cannot be scheduled",
    );
    fails("at 5s list", Syntax, Some("list"), 7, "cannot be scheduled");
    fails(
        "at 5s at 6s flush",
        Syntax,
        Some("at"),
        7,
        "cannot be nested",
    );
    fails(
        "at 5s kldload ipfw",
        Syntax,
        Some("kldload"),
        7,
        "nothing to schedule",
    );
    fails("at 5s", Syntax, None, 6, "a command to run");
    fails(
        "at 5s pipe 1 config dleay 5",
        Syntax,
        Some("dleay"),
        21,
        "a pipe option",
    );
    fails(
        "repeat every 5s",
        Syntax,
        Some("repeat"),
        1,
        "commands file",
    );
}

mod soup {
    use dummynet_lang::{parse_command, parse_file};
    use proptest::prelude::*;

    const SOUP: &[&str] = &[
        "delay",
        "jitter",
        "10ms",
        "5",
        "-5ms",
        ".5",
        "1.5s",
        "correlation",
        "corr",
        "25%",
        "0.25",
        "150%",
        "%",
        "-",
        "distribution",
        "uniform",
        "normal",
        "pareto",
        "nosuch",
        "unordered",
        "reorder",
        "gap",
        "0",
        "overhead",
        "-4",
        "cellsize",
        "celloverhead",
        "slot",
        "packets",
        "bytes",
        "64KB",
        "trace",
        "once",
        "loop",
        "loss",
        "random",
        "gemodel",
        "state",
        "duplicate",
        "corrupt",
        "bw",
        "1Mbit/s",
        "queue",
        "codel",
        "plr",
        "sched",
        "pipe",
        "type",
        "fq_codel",
        "quantum",
        "config",
        "modify",
        "at",
        "5s",
        "repeat",
        "every",
        "show",
        "flush",
        "é",
        "",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn impairment_soup_never_panics(words in prop::collection::vec(prop::sample::select(SOUP), 0..12)) {
            let line = words.join(" ");
            for l in [
                format!("pipe 1 config {line}"),
                format!("pipe 1 modify {line}"),
                format!("queue 1 modify {line}"),
                format!("sched 1 modify {line}"),
                format!("at 1s {line}"),
                line.clone(),
            ] {
                if let Err(e) = parse_command(&l) {
                    prop_assert!(e.offset + e.len <= l.len());
                    let _ = e.to_string();
                }
            }
            let file = format!("at 1s pipe 1 modify {line}\n{line}\nrepeat every 2s\n");
            if let Err(e) = parse_file(&file, None) {
                prop_assert!(e.error.offset + e.error.len <= e.error.source.len());
            }
        }
    }
}

/// `OPTION off` removes an impairment: with `modify`, only that one goes
/// and the rest of the pipe (and its queued packets) stays.
#[test]
fn off_removes_an_impairment() {
    use dummynet_engine::Engine;
    let mut e: Engine<u64> = Engine::new(1);
    for line in [
        "pipe 1 config bw 1Mbit/s delay 20ms jitter 5ms reorder 10% slot 1ms loss 1% \
         duplicate 1% corrupt 1% overhead 24",
        "pipe 1 modify jitter off slot off loss off corrupt off",
    ] {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        e.apply(0, c)
            .unwrap_or_else(|err| panic!("{line}: {err:?}"));
    }
    let shown = dummynet_lang::format_pipes(&e.snapshot(), &[]);
    let impair: Vec<&str> = shown.lines().filter(|l| l.contains("impair:")).collect();
    assert_eq!(
        impair,
        [
            "    impair: reorder 10% overhead 24",
            "    impair: duplicate 1%"
        ],
        "{shown}"
    );
    let Command::ModifyPipe(1, cfg, f) = apply("pipe 1 modify trace off profile off duplicate off")
    else {
        panic!()
    };
    assert!(f.contains(Field::Trace) && f.contains(Field::Profile) && f.contains(Field::Duplicate));
    assert!(cfg.link.trace.is_none() && cfg.flowset.duplicate.is_none());
    // `config` takes `off` too (it is the default there anyway).
    assert_eq!(pipe("pipe 1 config jitter off").link.jitter, None);
    fails(
        "pipe 1 modify delay off",
        ErrorKind::Syntax,
        Some("off"),
        21,
        "a delay",
    );
    fails(
        "pipe 1 modify bw off",
        ErrorKind::Syntax,
        Some("off"),
        18,
        "bandwidth",
    );
}

/// `seed N`: the pipe's own random streams. It shows on the `impair:` line,
/// `modify` sets it alone, and a `config` that leaves it out keeps it.
#[test]
fn a_pipes_seed_is_shown_and_kept() {
    use dummynet_engine::config::Seed;
    use dummynet_engine::Engine;
    let cfg = pipe("pipe 1 config delay 10ms loss random 1% seed 42");
    assert_eq!(cfg.link.seed, Some(Seed(42)));
    assert_eq!(cfg.flowset.loss, Some(LossModel::Random(corr(0.01, 0.0))));
    assert_eq!(pipe("pipe 1 config delay 10ms").link.seed, None);
    let Command::ModifyPipe(1, m, f) = apply("pipe 1 modify seed 18446744073709551615") else {
        panic!()
    };
    assert_eq!(
        (m.link.seed, f),
        (Some(Seed(u64::MAX)), fields(&[Field::Seed]))
    );
    fails(
        "pipe 1 config seed x",
        ErrorKind::Syntax,
        Some("x"),
        20,
        "seed",
    );
    fails(
        "pipe 1 config seed -1",
        ErrorKind::Syntax,
        Some("-1"),
        20,
        "seed",
    );
    fails(
        "queue 1 config seed 1",
        ErrorKind::Syntax,
        Some("seed"),
        16,
        "pipe",
    );

    let mut e: Engine<u64> = Engine::new(1);
    let impair = |e: &Engine<u64>| -> Vec<String> {
        dummynet_lang::format_pipes(&e.snapshot(), &[])
            .lines()
            .filter(|l| l.contains("impair:"))
            .map(String::from)
            .collect()
    };
    for (line, shown) in [
        (
            "pipe 1 config delay 10ms jitter 2ms loss random 1% seed 42",
            ["    impair: jitter 2ms seed 42", "    impair: loss 1%"],
        ),
        (
            "pipe 1 config delay 20ms jitter 3ms loss 2%",
            ["    impair: jitter 3ms seed 42", "    impair: loss 2%"],
        ),
        (
            "pipe 1 modify seed 7",
            ["    impair: jitter 3ms seed 7", "    impair: loss 2%"],
        ),
    ] {
        let Statement::Apply(c) = parse_command(line).unwrap().statement else {
            panic!("{line}")
        };
        e.apply(0, c)
            .unwrap_or_else(|err| panic!("{line}: {err:?}"));
        assert_eq!(impair(&e), shown, "{line}");
    }
}

/// A registered impairment ([`dummynet_engine::impair::REGISTRY`]) is read
/// from its table: positional values, then keywords, each in its kind's
/// units; it lands on the link or the flowset by its stage, `modify` names
/// it by its place in the registry, `off` takes it off, and its words are
/// what `show` prints back.
#[test]
fn registered_impairments_are_read_from_their_table() {
    use dummynet_engine::impair::{self, Impairment};
    let cfg = pipe("pipe 1 config delay 10ms stall 2 every 5s from 1s drop-every 3 from 2");
    let words = |s: &[impair::Staged]| s.iter().map(|x| x.display()).collect::<Vec<_>>();
    // A bare time is milliseconds, as in ipfw.
    assert_eq!(words(&cfg.link.staged), ["stall 2ms every 5s from 1s"]);
    assert_eq!(words(&cfg.flowset.staged), ["drop-every 3 from 2"]);
    let again = pipe(&format!(
        "pipe 1 config {} {}",
        words(&cfg.link.staged)[0],
        words(&cfg.flowset.staged)[0]
    ));
    assert_eq!(
        (again.link.staged, again.flowset.staged),
        (cfg.link.staged, cfg.flowset.staged)
    );

    let Command::ModifyPipe(1, cfg, f) = apply("pipe 1 modify stall off drop-every 4") else {
        panic!()
    };
    let place = |n: &str| impair::staged::index(impair::lookup(n).unwrap());
    assert!(f.contains_staged(place("stall")) && f.contains_staged(place("drop-every")));
    assert!(cfg.link.staged.is_empty());
    assert_eq!(words(&cfg.flowset.staged), ["drop-every 4"]);
    let Command::ModifyPipe(1, _, f) = apply("pipe 1 modify bw 1Mbit/s") else {
        panic!()
    };
    assert!(!f.contains_staged(place("stall")) && !f.contains_staged(place("drop-every")));
    let q = match apply("queue 2 config pipe 1 drop-every 7") {
        Command::ConfigQueue(2, q) => q,
        other => panic!("{other:?}"),
    };
    assert_eq!(words(&q.flowset.staged), ["drop-every 7"]);
}

#[test]
fn a_registered_impairment_points_at_its_mistakes() {
    fails(
        "pipe 1 config drop-every 0",
        ErrorKind::Range,
        Some("drop-every"),
        15,
        "n 0 is out of range 1..=",
    );
    fails(
        "pipe 1 config drop-every",
        ErrorKind::Syntax,
        None,
        25,
        "a whole number after `drop-every`",
    );
    fails(
        "pipe 1 config stall 1s",
        ErrorKind::Syntax,
        Some("stall"),
        15,
        "stall needs its period",
    );
    fails(
        "pipe 1 config stall 2s every 1s",
        ErrorKind::Syntax,
        Some("stall"),
        15,
        "shorter than its period 1s",
    );
    fails(
        "pipe 1 config stall 1s every x",
        ErrorKind::Syntax,
        Some("x"),
        30,
        "",
    );
    fails(
        "queue 1 config stall 1s every 2s",
        ErrorKind::Syntax,
        Some("stall"),
        16,
        "is a link option",
    );
    fails(
        "sched 1 config drop-every 2",
        ErrorKind::Syntax,
        Some("drop-every"),
        16,
        "is a queue option",
    );
    let e = err("pipe 1 config drop-evry 2");
    assert_eq!(e.suggestion, Some("drop-every"), "{e}");
}
