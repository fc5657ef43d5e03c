//! The documentation as printed: README.md stays short and opens with the two
//! commands a fresh machine runs, and every command example of README.md and
//! the book (docs/book/src) is either run here with its printed result
//! checked, or marked as an illustration and counted.
//!
//! Fenced blocks by their info string:
//! - `console`: each `$ COMMAND` line (a trailing `\` continues it) runs under
//!   `sh` from the repository root, with this build's `dummynet` first on
//!   PATH and `COLUMNS=100`; what it prints (stdout and stderr, in order)
//!   must be the lines that follow it, up to the next `$ ` line.
//! - `sh`, `python`, `rust` and `console` with the word `illustration` after
//!   the language (```` ```sh illustration ````): shown, not run (a live
//!   command on interfaces the reader has, a fragment of a program).
//! - `text`, `json` and the like: listings (grammar, output), not commands.
//!   A block without a language that holds a command fails the test.
//!
//! `DUMMYNET_DOCS_BLESS=1` rewrites the expected output of every `console`
//! block from what the commands print now (review the diff).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const README_MAX_LINES: usize = 250;
/// The two commands README.md gives first, in order.
const FRESH_MACHINE: [&str; 2] = [
    "cargo run --release -p dummynet -- demo",
    "cargo test --workspace --locked",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One fenced block: where it starts, its info string and its lines.
struct Block {
    file: PathBuf,
    line: usize,
    lang: String,
    illustration: bool,
    body: Vec<String>,
}

fn blocks(file: &Path) -> Vec<Block> {
    let text = read(file);
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let mut words = info.split_whitespace();
                let lang = words.next().unwrap_or("").to_string();
                let illustration = words.any(|w| w == "illustration");
                open = Some(Block {
                    file: file.to_path_buf(),
                    line: i + 1,
                    lang,
                    illustration,
                    body: Vec::new(),
                });
            }
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some(b), None) => b.body.push(line.to_string()),
            (None, None) => {}
        }
    }
    assert!(
        open.is_none(),
        "{}: a fenced block is not closed",
        file.display()
    );
    out
}

fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs/book/src"), &mut files);
    files
}

#[test]
fn readme_is_at_most_250_lines() {
    let n = read(&root().join("README.md")).lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines; at most {README_MAX_LINES}: the rest belongs in the book"
    );
}

/// README.md's first block holds exactly the two fresh-machine commands, and
/// CI runs them: `.ci/run` the tests as printed, tests/demo.rs the demo.
fn check_fresh_machine_block() -> Result<(), String> {
    let readme = root().join("README.md");
    let first = blocks(&readme)
        .into_iter()
        .next()
        .ok_or("README.md has no code block")?;
    let commands: Vec<&str> = first
        .body
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if commands != FRESH_MACHINE {
        return Err(format!(
            "README.md's first block runs {commands:?}, not {FRESH_MACHINE:?}"
        ));
    }
    // .ci/run runs the second as it is printed (a line of its own, not a comment).
    let ci = read(&root().join(".ci/run"));
    if !ci.lines().any(|l| l.trim() == FRESH_MACHINE[1]) {
        return Err(format!(".ci/run does not run `{}`", FRESH_MACHINE[1]));
    }
    // The first is `dummynet demo` from the binary's package, which
    // tests/demo.rs runs under that same test command.
    let demo_test = read(&root().join("crates/dummynet/tests/demo.rs"));
    let cargo = read(&root().join("crates/dummynet/Cargo.toml"));
    if !demo_test.contains("\"demo\"") || !cargo.contains("name = \"dummynet\"") {
        return Err("tests/demo.rs no longer runs `dummynet demo`".into());
    }
    Ok(())
}

#[test]
fn readme_opens_with_the_fresh_machine_commands_ci_runs() {
    if let Err(e) = check_fresh_machine_block() {
        panic!("{e}");
    }
}

/// `$ COMMAND` lines and the output each should print.
fn console_steps(block: &Block) -> Vec<(String, Vec<String>)> {
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    let mut continuing = false;
    for line in &block.body {
        if continuing {
            let (cmd, _) = steps.last_mut().unwrap();
            cmd.push('\n');
            cmd.push_str(line);
            continuing = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push((cmd.to_string(), Vec::new()));
            continuing = cmd.ends_with('\\');
        } else {
            match steps.last_mut() {
                Some((_, out)) => out.push(line.clone()),
                None => panic!(
                    "{}:{}: a console block must start with a `$ ` line",
                    block.file.display(),
                    block.line
                ),
            }
        }
    }
    steps
}

fn run_console(command: &str, bin_dir: &Path) -> String {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(root())
        .env("PATH", path)
        .env("COLUMNS", "100")
        .env("LC_ALL", "C")
        .env_remove("DUMMYNET_SOCKET")
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn documented_examples_run_as_printed() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_dummynet"));
    let bin_dir = bin.parent().unwrap().to_path_buf();
    let bless = std::env::var_os("DUMMYNET_DOCS_BLESS").is_some();
    let (mut run, mut passed, mut unmarked, mut listings) = (0, 0, 0, 0);
    let mut illustrations = Vec::new();
    let mut failures = String::new();
    for file in markdown_files() {
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut blessed: Vec<(usize, Vec<String>)> = Vec::new();
        for (i, block) in blocks(&file).into_iter().enumerate() {
            if file.ends_with("README.md") && i == 0 {
                // Run by CI itself; checked to be what CI runs.
                run += 1;
                match check_fresh_machine_block() {
                    Ok(()) => passed += 1,
                    Err(e) => {
                        let _ = writeln!(failures, "{rel}:{}: {e}\n", block.line);
                    }
                }
                continue;
            }
            let command_lang = matches!(block.lang.as_str(), "console" | "sh" | "python" | "rust");
            if block.illustration {
                assert!(
                    command_lang,
                    "{rel}:{}: only commands are illustrations",
                    block.line
                );
                illustrations.push(format!("{rel}:{}", block.line));
                continue;
            }
            match block.lang.as_str() {
                "console" => {
                    run += 1;
                    let mut ok = true;
                    let mut actual = Vec::new();
                    for (cmd, expected) in console_steps(&block) {
                        let got = run_console(&cmd, &bin_dir);
                        let got: Vec<String> = got.lines().map(str::to_string).collect();
                        actual.push(format!("$ {cmd}"));
                        actual.extend(got.iter().cloned());
                        if got != expected {
                            ok = false;
                            let _ = writeln!(
                                failures,
                                "{rel}:{}: `{cmd}` printed\n{}\n-- where the book says\n{}\n",
                                block.line,
                                got.join("\n"),
                                expected.join("\n")
                            );
                        }
                    }
                    if ok {
                        passed += 1;
                    } else if bless {
                        blessed.push((block.line, actual));
                    }
                }
                "sh" | "python" | "rust" => {
                    unmarked += 1;
                    let _ = writeln!(
                        failures,
                        "{rel}:{}: a `{}` example that is neither run (`console`) nor marked \
                         `{} illustration`\n",
                        block.line, block.lang, block.lang
                    );
                }
                "" => {
                    let command = block.body.iter().find(|l| {
                        let l = l.trim_start();
                        ["$ ", "dummynet ", "sudo ", "cargo "]
                            .iter()
                            .any(|p| l.starts_with(p))
                    });
                    if let Some(command) = command {
                        let _ = writeln!(
                            failures,
                            "{rel}:{}: a block without a language holds a command (`{command}`): \
                             make it `console`, or mark it\n",
                            block.line
                        );
                    }
                    listings += 1;
                }
                _ => listings += 1,
            }
        }
        if bless && !blessed.is_empty() {
            rewrite(&file, &blessed);
        }
    }
    let total = run + unmarked + illustrations.len();
    println!(
        "documentation examples: {run} run, {passed} passed, {} illustration-only ({:.0}% of {total}), \
         {} failed; {listings} listings",
        illustrations.len(),
        100.0 * illustrations.len() as f64 / total.max(1) as f64,
        run - passed + unmarked
    );
    println!("illustration-only: {}", illustrations.join(" "));
    assert!(
        failures.is_empty(),
        "{failures}(DUMMYNET_DOCS_BLESS=1 rewrites console blocks from what they print)"
    );
}

/// Replaces the body of the console blocks starting at the given lines.
fn rewrite(file: &Path, blessed: &[(usize, Vec<String>)]) {
    let text = read(file);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        out.push_str(lines[i]);
        out.push('\n');
        if let Some((_, body)) = blessed.iter().find(|(l, _)| *l == i + 1) {
            for b in body {
                out.push_str(b);
                out.push('\n');
            }
            i += 1;
            while !lines[i].starts_with("```") {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    std::fs::write(file, out).unwrap();
}
