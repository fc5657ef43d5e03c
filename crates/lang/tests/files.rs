//! Commands files, delay profiles read from disk, and how errors read.

use std::path::PathBuf;

use dummynet_engine::aqm::codel;
use dummynet_engine::config::{
    AqmConfig, Command, Field, LinkConfig, PipeConfig, Schedule, Setting,
};
use dummynet_engine::time::{NS_PER_MS, NS_PER_SEC};
use dummynet_engine::Engine;
use dummynet_lang::{parse_command, parse_file, ErrorKind, FileError, Parsed, Statement};

/// A scratch directory of our own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("dummynet-lang-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SETUP: &str = "\
# Seed 000: a VDSL-like link, one pipe per direction.
kenv net.inet.ip.fw.default_to_accept=1
kldload ipfw dummynet

$ ipfw pipe 1 config delay 10ms bw 50Mbit/s queue 1000kb
ipfw pipe 2 config delay 10ms bw 10Mbit/s queue 200kb   # the uplink
# ipfw add 100 deny ip from any to any
ipfw add 00097 pipe 1 ip from 192.168.100.2 to 192.168.100.1\r
ipfw -q add 00099 pipe 2 ip from 192.168.100.1 to 192.168.100.2
";

#[test]
fn commands_file() {
    let parsed = parse_file(SETUP, None).unwrap();
    let lines: Vec<usize> = parsed.iter().map(|(n, _)| *n).collect();
    // Blank lines and comments are skipped, and a commented-out command stays off.
    assert_eq!(lines, [2, 3, 5, 6, 8, 9]);
    assert_eq!(
        parsed[0].1.statement,
        Statement::Apply(Command::Set(Setting::DefaultToAccept(true)))
    );
    assert!(matches!(parsed[1].1.statement, Statement::Nop(_)));
    assert!(matches!(
        parsed[3].1.statement,
        Statement::Apply(Command::ConfigPipe(2, _))
    ));
    assert!(parsed[5].1.flags.quiet);
    assert_eq!(parse_file("", None).unwrap(), vec![]);
}

#[test]
fn file_errors_carry_the_line() {
    let text = "pipe 1 config bw 1Mbit/s\n\npipe 2 config dleay 5\n";
    let FileError { line, error } = parse_file(text, None).unwrap_err();
    assert_eq!(line, 3);
    assert_eq!(
        (error.found(), error.column, error.suggestion),
        (Some("dleay"), 15, Some("delay"))
    );
    let shown = FileError { line, error }.to_string();
    assert!(
        shown.starts_with("line 3: expected a pipe option, found `dleay`"),
        "{shown}"
    );
}

#[test]
fn profiles_are_read_relative_to_the_base_dir() {
    let dir = TempDir::new("profile");
    std::fs::write(
        dir.0.join("wlan.txt"),
        "name wlan\nbw 20Mbit/s\nloss-level 0.97\nsamples 10\nprob delay\n0 0.5\n1 2\n",
    )
    .unwrap();
    let parsed = parse_file("pipe 1 config bw 1Mbit/s profile wlan.txt\n", Some(&dir.0)).unwrap();
    let Statement::Apply(Command::ConfigPipe(1, cfg)) = &parsed[0].1.statement else {
        panic!("{parsed:?}")
    };
    let profile = cfg.link.profile.as_ref().expect("profile");
    assert_eq!(profile.name, "wlan");
    assert_eq!(profile.bw, Some(20_000_000));
    assert_eq!(profile.samples.len(), 10);
    assert_eq!(cfg.link.bw, 1_000_000);

    let e = parse_file("sched 1 config profile missing.txt", Some(&dir.0))
        .unwrap_err()
        .error;
    assert_eq!((e.kind, e.found()), (ErrorKind::File, Some("missing.txt")));
    assert!(e.message.contains("cannot read profile"), "{e}");

    std::fs::write(dir.0.join("bad.txt"), "nmae x\n").unwrap();
    let e = parse_file("pipe 1 config profile bad.txt", Some(&dir.0))
        .unwrap_err()
        .error;
    assert_eq!((e.kind, e.found()), (ErrorKind::File, Some("bad.txt")));
    assert!(e.message.contains("line 1"), "{e}");
}

#[test]
fn errors_show_the_line_and_a_caret() {
    let e = parse_command("ipfw add 100 pipe 1 form any to any").unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected a protocol, `from` or a rule option, found `form` (column 21); did you mean `from`?\n\
         \x20   ipfw add 100 pipe 1 form any to any\n\
         \x20                       ^^^^"
    );
    assert_eq!((e.offset, e.len), (20, 4));

    let e = parse_command("pipe 1 config bw").unwrap_err();
    assert_eq!(e.found(), None);
    assert!(e.message.ends_with("found end of line"), "{e}");
    assert_eq!(e.column, 17);

    // Columns count characters, not bytes.
    let e = parse_command("add allow ip from any to any via é0 bogus").unwrap_err();
    assert_eq!((e.found(), e.column, e.offset), (Some("bogus"), 37, 37));
    assert!(e
        .snippet()
        .ends_with(&format!("{}^^^^^", " ".repeat(4 + 36))));
}

#[test]
fn numbers_out_of_range_give_the_range() {
    for (line, range) in [
        ("add 70000 allow ip from any to any", "1..65534"),
        ("add pipe 70000 ip from any to any", "1..65535"),
        ("queue 1 config weight 1000", "1..100"),
        ("pipe 1 config buckets 100000", "1..65536"),
        ("delete 0", "1..65535"),
        ("add allow ip from any to any ipversion 5", "4 or 6"),
    ] {
        let e = parse_command(line).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Range, "{e}");
        assert!(e.message.contains(range), "{line}: {e}");
    }
}

#[test]
fn near_misses_get_suggestions() {
    for (line, typo, fix) in [
        ("ipfw ad pipe 1 ip from any to any", "ad", "add"),
        ("ipfw add alow ip from any to any", "alow", "allow"),
        ("ipfw add allow tpc from any to any", "tpc", "tcp"),
        (
            "ipfw add allow ip from any to any out vai em0",
            "vai",
            "via",
        ),
        ("ipfw pipe 1 confgi bw 1", "confgi", "config"),
        ("ipfw pipe 1 config bandwith 1", "bandwith", "bandwidth"),
        ("ipfw queue 1 config wieght 5", "wieght", "weight"),
    ] {
        let e = parse_command(line).unwrap_err();
        assert_eq!(e.found(), Some(typo), "{line}: {e}");
        assert_eq!(e.suggestion, Some(fix), "{line}: {e}");
    }
    // No suggestion when nothing is close.
    assert_eq!(
        parse_command("ipfw add allow ip from any to any frobnicate")
            .unwrap_err()
            .suggestion,
        None
    );
}

fn command(p: &Parsed) -> &Command {
    match &p.statement {
        Statement::Apply(c) => c,
        other => panic!("{other:?}"),
    }
}

fn line_command(line: &str) -> Command {
    command(&parse_command(line).unwrap()).clone()
}

const SCHEDULES: &str = "\
pipe 1 config bw 10Mbit/s delay 20ms
at 0s pipe 1 modify bw 10Mbit/s
# the handover: a comment does not end the block
at 5s pipe 1 modify bw 1Mbit/s loss 5%

at 5s sysctl net.inet.ip.dummynet.codel.target=20000
at 9500ms ipfw pipe 1 modify delay 100ms 10ms
repeat every 10s
pipe 2 config bw 1Mbit/s codel
at 1.5s pipe 2 delete
at 2s queue 1 modify weight 5 sched 2
flush
at 0s sched 1 modify quantum 3000
";

#[test]
fn at_lines_make_schedules() {
    let parsed = parse_file(SCHEDULES, None).unwrap();
    let lines: Vec<usize> = parsed.iter().map(|(n, _)| *n).collect();
    // Each block at the line of its first `at`, in file order.
    assert_eq!(lines, [1, 2, 9, 10, 12, 13]);
    let steps = vec![
        (0, line_command("pipe 1 modify bw 10Mbit/s")),
        (
            5 * NS_PER_SEC,
            line_command("pipe 1 modify bw 1Mbit/s loss 5%"),
        ),
        (
            5 * NS_PER_SEC,
            Command::Set(Setting::Tunable {
                sysctl: "codel.target",
                value: 20_000,
            }),
        ),
        (
            9_500 * NS_PER_MS,
            line_command("pipe 1 modify delay 100ms 10ms"),
        ),
    ];
    assert_eq!(
        command(&parsed[1].1),
        &Command::Schedule(Schedule {
            steps,
            every: Some(10 * NS_PER_SEC)
        })
    );
    // `delay T J` in a step names both groups it sets, and nothing else.
    let Command::Schedule(s) = command(&parsed[1].1) else {
        unreachable!()
    };
    let Command::ModifyPipe(1, _, f) = &s.steps[3].1 else {
        panic!("{:?}", s.steps[3])
    };
    assert!(f.contains(Field::Delay) && f.contains(Field::Jitter));
    assert!(!f.contains(Field::Bw));

    // `codel` on line 9 is as written: the engine fills its target when it
    // applies it, from the sysctls in force then.
    let Command::ConfigPipe(2, PipeConfig { flowset, .. }) = command(&parsed[2].1) else {
        panic!()
    };
    assert_eq!(flowset.aqm, AqmConfig::new(&codel::TYPE, Vec::new()));
    // Without `repeat`, a block runs once.
    assert_eq!(
        command(&parsed[3].1),
        &Command::Schedule(Schedule {
            steps: vec![
                (1_500 * NS_PER_MS, Command::DeletePipes(vec![2])),
                (
                    2 * NS_PER_SEC,
                    line_command("queue 1 modify weight 5 sched 2")
                ),
            ],
            every: None
        })
    );
    assert_eq!(command(&parsed[4].1), &Command::FlushRules);
    let Command::Schedule(Schedule { steps, every: None }) = command(&parsed[5].1) else {
        panic!()
    };
    assert_eq!(steps, &[(0, line_command("sched 1 modify quantum 3000"))]);
}

/// A sysctl counts for the commands applied after it, scheduled or not,
/// as on FreeBSD running the file line by line.
#[test]
fn a_sysctl_counts_from_when_it_is_applied() {
    let text = "\
pipe 1 config codel
sysctl net.inet.ip.dummynet.codel.target=20000
pipe 2 config codel
at 1s pipe 3 config codel
at 2s sysctl net.inet.ip.dummynet.codel.target=9000
at 3s pipe 4 config codel
";
    let mut e: Engine<u64> = Engine::new(1);
    for (n, p) in parse_file(text, None).unwrap() {
        e.apply(0, command(&p).clone())
            .unwrap_or_else(|err| panic!("line {n}: {err:?}"));
    }
    e.apply(4 * NS_PER_SEC, Command::ZeroRules(Vec::new()))
        .unwrap();
    // The pipes' own flowsets, in pipe order.
    let targets: Vec<String> = e
        .snapshot()
        .flowsets
        .iter()
        .map(|f| f.aqm.clone())
        .collect();
    assert_eq!(
        targets,
        ["5ms", "20ms", "20ms", "9ms"]
            .map(|t| format!("AQM CoDel target {t} interval 100ms NoECN"))
    );
}

/// `at flush` cancels the schedules running; in a file it applies in
/// its place (it is no step of a block), and it takes nothing after it.
#[test]
fn at_flush_cancels_schedules() {
    assert_eq!(line_command("at flush"), Command::CancelSchedules);
    assert_eq!(line_command("ipfw at flush"), Command::CancelSchedules);
    let parsed = parse_file("at 1s pipe 1 delete\nat flush\nat 2s pipe 2 delete\n", None).unwrap();
    let commands: Vec<&Command> = parsed.iter().map(|(_, p)| command(p)).collect();
    assert!(matches!(
        commands[..],
        [
            Command::Schedule(_),
            Command::CancelSchedules,
            Command::Schedule(_)
        ]
    ));
    let e = parse_command("at flush now").unwrap_err();
    assert_eq!(e.found(), Some("now"));
}

#[test]
fn schedule_errors_in_files() {
    for (text, line, found, says) in [
        (
            "repeat every 10s\n",
            1,
            Some("repeat"),
            "no block of `at T COMMAND` lines",
        ),
        (
            "at 1s flush\nflush\nrepeat every 10s\n",
            3,
            Some("repeat"),
            "no block",
        ),
        (
            "at 1s flush\nrepeat every 10s\nrepeat every 10s\n",
            3,
            Some("repeat"),
            "no block",
        ),
        (
            "at 1s flush\nat 20s flush\nrepeat every 10s\n",
            3,
            Some("10s"),
            "shorter than the block it repeats, whose last step is at 20s",
        ),
        ("at 0s flush\nrepeat every 0s\n", 2, Some("0s"), "above 0"),
        ("at 1s flush\nrepeat each 10s\n", 2, Some("each"), "`every`"),
        (
            "at 1s flush\nrepeat every 10\n",
            2,
            Some("10"),
            "bare number",
        ),
        (
            "at 1s flush\nrepeat every 10s please\n",
            2,
            Some("please"),
            "unexpected",
        ),
        (
            "pipe 1 config\nat 5 pipe 1 delete\n",
            2,
            Some("5"),
            "with its unit",
        ),
        ("at 5s show\n", 1, Some("show"), "cannot be scheduled"),
        (
            "at 5s queue show 1\n",
            1,
            Some("show"),
            "cannot be scheduled",
        ),
        (
            "at 5s flush\nat 2s flush\n",
            2,
            Some("2s"),
            "comes before the step above it, at 5s",
        ),
        ("at 5s at 1s flush\n", 1, Some("at"), "nested"),
    ] {
        let FileError { line: l, error } = parse_file(text, None).expect_err(text);
        assert_eq!((l, error.found()), (line, found), "{text}: {error}");
        assert!(error.message.contains(says), "{text}: {error}");
    }
    // Times may repeat, and a new block may start over.
    let parsed = parse_file("at 5s flush\nat 5s flush\nflush\nat 1s flush\n", None).unwrap();
    assert_eq!(parsed.len(), 3);
    // The period may equal the last step (it then follows the step at once).
    assert!(parse_file("at 0s flush\nat 10s flush\nrepeat every 10s\n", None).is_ok());
}

#[test]
fn traces_in_files_are_read_relative_to_the_base_dir() {
    let dir = TempDir::new("trace");
    std::fs::write(dir.0.join("lte.trace"), "1\n1\n2\n").unwrap();
    let text =
        "pipe 1 config delay 20ms trace lte.trace\nat 10s pipe 1 modify trace lte.trace once\n";
    let parsed = parse_file(text, Some(&dir.0)).unwrap();
    let Command::ConfigPipe(
        1,
        PipeConfig {
            link: LinkConfig { trace: Some(t), .. },
            ..
        },
    ) = command(&parsed[0].1)
    else {
        panic!()
    };
    assert_eq!((t.name.as_str(), t.times.len()), ("lte.trace", 3));
    let e = parse_file("pipe 1 config trace lte.trace\n", None)
        .unwrap_err()
        .error;
    assert_eq!((e.kind, e.found()), (ErrorKind::File, Some("lte.trace")));
}
