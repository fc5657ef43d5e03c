//! Commands files, delay profiles read from disk, and how errors read.

use std::path::PathBuf;

use dummynet_engine::config::{Command, Setting};
use dummynet_lang::{parse_command, parse_file, ErrorKind, FileError, Statement};

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
        ("queue 1 config weight 1000", "0..100"),
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
