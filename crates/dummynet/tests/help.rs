//! Help that fits a terminal, in the user's words: every subcommand's `-h`
//! on an 80-column request (`COLUMNS=80`, as a terminal of that width sets
//! it) has no line over 100 columns, and what users read (`--help`,
//! `presets`, `presets --json`, examples/) names the typical-links table by
//! its own name, never by the project's internal "seed 000".

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_dummynet");

/// Every subcommand; checked against `dummynet --help`'s list below, so a
/// new one cannot be left out.
const SUBCOMMANDS: &[&str] = &[
    "sim",
    "plot",
    "gen",
    "gen-trace",
    "bench",
    "demo",
    "run",
    "shell",
    "experiment",
    "flood",
    "presets",
    "install",
    "ps",
    "stats",
    "ipfw",
    "dnctl",
    "tc",
];

fn output(args: &[&str], columns: &str) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("COLUMNS", columns)
        .output()
        .expect("the binary runs");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn the_subcommand_list_is_complete() {
    let help = output(&["--help"], "80");
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert_eq!(listed, SUBCOMMANDS, "dummynet --help lists:\n{help}");
}

#[test]
fn short_help_fits_an_80_column_terminal() {
    let mut too_wide = Vec::new();
    let top: [&str; 0] = [];
    for args in std::iter::once(&top[..]).chain(SUBCOMMANDS.iter().map(std::slice::from_ref)) {
        let mut argv = args.to_vec();
        argv.push("-h");
        let text = output(&argv, "80");
        assert!(text.lines().count() > 2, "dummynet {argv:?}: {text}");
        for line in text.lines() {
            let width = line.chars().count();
            if width > 100 {
                too_wide.push(format!("dummynet {} ({width}): {line}", argv.join(" ")));
            }
        }
    }
    assert!(
        too_wide.is_empty(),
        "lines over 100 columns with COLUMNS=80:\n{}",
        too_wide.join("\n")
    );
}

/// Each "seed 0NN" in `text`, with the words around it; help wraps lines,
/// so the text is read as words, whatever whitespace is between them.
fn internal_names(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    (0..words.len().saturating_sub(1))
        .filter(|&i| words[i].eq_ignore_ascii_case("seed") && words[i + 1].starts_with('0'))
        .map(|i| words[i.saturating_sub(6)..(i + 6).min(words.len())].join(" "))
        .collect()
}

#[test]
fn user_facing_text_names_the_typical_links_table() {
    let mut found = Vec::new();
    let mut texts = vec![
        ("--help".to_string(), output(&["--help"], "80")),
        ("presets".to_string(), output(&["presets"], "200")),
        (
            "presets --json".to_string(),
            output(&["presets", "--json"], "80"),
        ),
    ];
    for sub in SUBCOMMANDS {
        texts.push((format!("{sub} --help"), output(&[sub, "--help"], "80")));
    }
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for entry in std::fs::read_dir(&examples).expect("examples/") {
        let path = entry.expect("an entry").path();
        if let Ok(text) = std::fs::read_to_string(&path) {
            texts.push((path.display().to_string(), text));
        }
    }
    for (what, text) in &texts {
        for line in internal_names(text) {
            found.push(format!("{what}: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "internal names users see:\n{}",
        found.join("\n")
    );
    let json = output(&["presets", "--json"], "80");
    assert!(
        json.contains("Bandwidth and Delay for Different Types of Network"),
        "presets --json names the table's source: {json}"
    );
}
