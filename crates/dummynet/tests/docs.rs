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
//! - `sh live` and `python live`: run as root, each block in a network
//!   namespace of its own (with interfaces `eth1` and `eth2`, veths, for the
//!   bridge examples, and a private /run), from a scratch directory holding
//!   `examples/`, a stand-in `./my-test` (a ping of `$DUMMYNET_PEER`) and
//!   `my-app`/`my-client` on PATH (a ping of their last argument); `sudo` is
//!   a no-op, `$HOME` is the scratch directory with this build as
//!   `~/.cargo/bin/dummynet`, and a block that runs `dummynet install` has
//!   tmpfs over /usr/local/bin and /usr/local/share.
//!   A `sh` block must exit 0 (under `set -e`, and curl fails on an HTTP
//!   error status) and print no HTTP API error (`{"error":`); a `python`
//!   block is a pytest file if it has a `def test_`, else a script, run with
//!   the client from clients/python and DUMMYNET_REQUIRE=1. Without root (or
//!   pytest) they are counted as skipped.
//!   `ipfw` and `dnctl` are links to this build. `sh live daemon`: a bridge
//!   daemon (`dummynet run --bridge eth1 eth2`) is running and answering on
//!   the default socket when the block starts; `sh live http`: the same
//!   with `--http 127.0.0.1:8080`.
//! - `rust test`: a Rust example that tests/book_rust.rs holds line for line
//!   and runs (see `check_rust_block`).
//! - `sh ci`: commands `.ci/run` runs (see `check_ci_block`), checked to be
//!   there.
//! - `text`, `json` and the like: listings (grammar, output), not commands.
//!   A block without a language that holds a command fails the test.
//!
//! `DUMMYNET_DOCS_BLESS=1` rewrites the expected output of every `console`
//! block from what the commands print now (review the diff).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const README_MAX_LINES: usize = 250;
/// Illustration-only examples must stay under this share of all examples.
const ILLUSTRATION_MAX_PERCENT: usize = 10;
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
    live: bool,
    daemon: bool,
    http: bool,
    ci: bool,
    test: bool,
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
                let words: Vec<&str> = words.collect();
                open = Some(Block {
                    file: file.to_path_buf(),
                    line: i + 1,
                    lang,
                    illustration: words.contains(&"illustration"),
                    live: words.contains(&"live"),
                    ci: words.contains(&"ci"),
                    daemon: words.contains(&"daemon"),
                    http: words.contains(&"http"),
                    test: words.contains(&"test"),
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

/// A `sh ci` block: commands `.ci/run` runs. Each command (comments and a
/// leading `sudo` aside) is one of README's fresh-machine commands, or has its
/// words in order on one line of `.ci/run`; `cargo test -p CRATE --test NAME`
/// is run by `.ci/run`'s `cargo test --workspace` when CRATE has tests/NAME.rs.
fn check_ci_block(block: &Block) -> Result<(), String> {
    let ci = read(&root().join(".ci/run"));
    let mut n = 0;
    for line in &block.body {
        let command = line.split(" #").next().unwrap_or("").trim();
        let command = command.strip_prefix("sudo ").unwrap_or(command);
        if command.is_empty() || command.starts_with('#') {
            continue;
        }
        n += 1;
        if FRESH_MACHINE.contains(&command) {
            check_fresh_machine_block()?;
            continue;
        }
        let words: Vec<&str> = command.split_whitespace().collect();
        if let ["cargo", "test", "-p", krate, "--test", name] = words[..] {
            let workspace = ci.lines().any(|l| l.trim() == FRESH_MACHINE[1]);
            if workspace && crate_has_test(krate, name) {
                continue;
            }
            return Err(format!(
                "`{command}`: .ci/run does not run `{}` or {krate} has no tests/{name}.rs",
                FRESH_MACHINE[1]
            ));
        }
        let on_a_line = ci.lines().any(|l| {
            let mut have = l.split_whitespace();
            words.iter().all(|w| have.any(|h| h == *w))
        });
        if !on_a_line {
            return Err(format!("`{command}` is not run by .ci/run"));
        }
    }
    if n == 0 {
        return Err("a `sh ci` block with no command".into());
    }
    Ok(())
}

/// Where the book's `rust test` blocks are run, line for line.
const RUST_EXAMPLES: &str = "crates/dummynet/tests/book_rust.rs";

/// A `rust test` block: its lines (trimmed) are consecutive lines of
/// [`RUST_EXAMPLES`], whose tests run them.
fn check_rust_block(block: &Block) -> Result<(), String> {
    let file = read(&root().join(RUST_EXAMPLES));
    let have: Vec<&str> = file.lines().map(str::trim).collect();
    let want: Vec<&str> = block
        .body
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if want.is_empty() || !have.windows(want.len()).any(|w| w == want.as_slice()) {
        return Err(format!(
            "this `rust test` block is not, line for line, in {RUST_EXAMPLES} (which runs it)"
        ));
    }
    Ok(())
}

/// Whether the workspace crate named `krate` has the test target `name`.
fn crate_has_test(krate: &str, name: &str) -> bool {
    let Ok(dirs) = std::fs::read_dir(root().join("crates")) else {
        return false;
    };
    dirs.flatten().any(|d| {
        let manifest = std::fs::read_to_string(d.path().join("Cargo.toml")).unwrap_or_default();
        manifest.contains(&format!("name = \"{krate}\""))
            && d.path().join("tests").join(format!("{name}.rs")).is_file()
    })
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
    let (mut run, mut passed, mut unmarked, mut listings, mut live_n) = (0, 0, 0, 0, 0);
    let mut skipped: Vec<String> = Vec::new();
    let mut illustrations = Vec::new();
    let mut failures = String::new();
    // DUMMYNET_DOCS_ONLY=PART runs only the files whose path holds PART
    // (while writing them); the share of illustrations is then not judged.
    let only = std::env::var("DUMMYNET_DOCS_ONLY").ok();
    for file in markdown_files() {
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        if only.as_ref().is_some_and(|o| !rel.contains(o.as_str())) {
            continue;
        }
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
            if block.ci {
                run += 1;
                match check_ci_block(&block) {
                    Ok(()) => passed += 1,
                    Err(e) => {
                        let _ = writeln!(failures, "{rel}:{}: {e}\n", block.line);
                    }
                }
                continue;
            }
            if block.lang == "rust" && block.test {
                run += 1;
                match check_rust_block(&block) {
                    Ok(()) => passed += 1,
                    Err(e) => {
                        let _ = writeln!(failures, "{rel}:{}: {e}\n", block.line);
                    }
                }
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
                "sh" | "python" if block.live => {
                    run += 1;
                    live_n += 1;
                    match run_live(&block, &bin_dir, live_n) {
                        Live::Passed => passed += 1,
                        Live::Skipped(why) => {
                            run -= 1;
                            skipped.push(format!("{rel}:{} ({why})", block.line));
                        }
                        Live::Failed(why) => {
                            let _ = writeln!(failures, "{rel}:{}: {why}\n", block.line);
                        }
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
    let total = run + unmarked + illustrations.len() + skipped.len();
    let mut report = format!(
        "documentation examples: {run} run, {passed} passed, {} illustration-only ({:.0}% of {total}), \
         {} failed, {} live ones skipped; {listings} listings",
        illustrations.len(),
        100.0 * illustrations.len() as f64 / total.max(1) as f64,
        run - passed + unmarked,
        skipped.len()
    );
    if !skipped.is_empty() {
        let _ = write!(report, "\nskipped: {}", skipped.join(" "));
    }
    let _ = write!(report, "\nillustration-only: {}", illustrations.join(" "));
    // Straight to stderr, past the test harness's capture: CI's log shows
    // the counts of a passing run too.
    let _ = writeln!(std::io::stderr(), "{report}");
    assert!(
        failures.is_empty(),
        "{failures}(DUMMYNET_DOCS_BLESS=1 rewrites console blocks from what they print)"
    );
    assert!(
        only.is_some() || illustrations.len() * 100 < ILLUSTRATION_MAX_PERCENT * total,
        "{} of {total} examples are illustration-only: fewer than {ILLUSTRATION_MAX_PERCENT}% \
         may be; make them run (`console`, `sh live`, `python live`, `sh ci`)",
        illustrations.len()
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

enum Live {
    Passed,
    Skipped(&'static str),
    Failed(String),
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A network namespace and a scratch directory, removed even on failure.
struct Sandbox {
    netns: String,
    dir: PathBuf,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What every live `sh` block runs in: its namespace's interfaces up, a
/// private /run (the daemon's default socket and records stay in it), and
/// what it leaves running is killed after it ends (see `run_live`); curl
/// answered with an HTTP error fails the block.
const LIVE_PRELUDE: &str = "set -e
curl() { command curl --fail-with-body \"$@\"; }
mount -t tmpfs dn-docs /run
ip link set lo up
ip link add eth1 type veth peer name eth1p
ip link add eth2 type veth peer name eth2p
for i in eth1 eth1p eth2 eth2p; do ip link set \"$i\" up; done
";

/// What a `sh live daemon` block finds running: a bridge between the
/// namespace's `eth1` and `eth2` on the default socket, answering.
const DAEMON_PRELUDE: &str =
    "dummynet run --bridge eth1 eth2 $DN_DOCS_HTTP >/run/dn-docs-daemon.log 2>&1 &
i=0
until dummynet ipfw show >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 150 ] || { cat /run/dn-docs-daemon.log; exit 1; }; sleep 0.1
done
";

fn run_live(block: &Block, bin_dir: &Path, n: usize) -> Live {
    if !is_root() {
        return Live::Skipped("not root");
    }
    let have_pytest = || {
        Command::new("python3")
            .args(["-m", "pytest", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if block.lang == "python" && !have_pytest() {
        return Live::Skipped("no pytest");
    }
    let sandbox = Sandbox {
        netns: format!("dnd-{}-{n}", std::process::id()),
        dir: std::env::temp_dir().join(format!("dnd-{}-{n}", std::process::id())),
    };
    let _ = std::fs::remove_dir_all(&sandbox.dir);
    let stand_ins = sandbox.dir.join(".bin");
    std::fs::create_dir_all(&stand_ins).expect("scratch directory");
    let script = |name: &Path, text: &str| {
        std::fs::write(name, text).expect("a stand-in");
        let mut perm = std::fs::metadata(name).expect("written").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(name, perm).expect("chmod");
    };
    script(&stand_ins.join("sudo"), "#!/bin/sh\nexec \"$@\"\n");
    for name in ["ipfw", "dnctl"] {
        std::os::unix::fs::symlink(bin_dir.join("dummynet"), stand_ins.join(name))
            .expect("the ipfw and dnctl links");
    }
    // `my-app --server PEER` and `my-client PEER`: an application that
    // needs the peer (a ping of its last argument).
    let pinger = "#!/bin/sh\nfor a; do :; done\nping -c 1 -W 5 \"$a\" >/dev/null\n";
    script(&stand_ins.join("my-app"), pinger);
    script(&stand_ins.join("my-client"), pinger);
    // ~/.cargo/bin/dummynet: this build, as `cargo install` would leave it.
    let cargo_bin = sandbox.dir.join(".cargo/bin");
    std::fs::create_dir_all(&cargo_bin).expect("~/.cargo/bin");
    std::os::unix::fs::symlink(bin_dir.join("dummynet"), cargo_bin.join("dummynet"))
        .expect("~/.cargo/bin/dummynet");
    script(
        &sandbox.dir.join("my-test"),
        "#!/bin/sh\nping -c 1 -W 5 \"$DUMMYNET_PEER\" >/dev/null\n",
    );
    std::os::unix::fs::symlink(root().join("examples"), sandbox.dir.join("examples"))
        .expect("examples link");
    let made = Command::new("ip")
        .args(["netns", "add", &sandbox.netns])
        .status();
    if !made.is_ok_and(|s| s.success()) {
        return Live::Failed(format!("cannot make network namespace {}", sandbox.netns));
    }
    let body = block.body.join("\n");
    // The plugin comes with the installed package (its pytest11 entry
    // point, which pytest loads even when the package's files are gone);
    // before `pip install` (CI installs it after the Rust tests), name it.
    // Naming it as well as its entry point would register it twice.
    let installed = Command::new("python3")
        .args([
            "-c",
            "import importlib.metadata as m, sys; \
             sys.exit(0 if any(e.name == 'dummynet' for e in m.entry_points(group='pytest11')) else 1)",
        ])
        .current_dir(std::env::temp_dir())
        .status()
        .is_ok_and(|s| s.success());
    let (program, mut args): (&str, Vec<String>) = if block.lang == "python" {
        // A block with tests is a pytest file; another, a script. Both
        // after the prelude (the veths, a private /run).
        let pytest = body.contains("def test_");
        let file = sandbox.dir.join(if pytest {
            "test_doc_example.py"
        } else {
            "doc_example.py"
        });
        std::fs::write(&file, &body).expect("the test file");
        let mut args: Vec<String> = vec![
            "-c".into(),
            format!("{LIVE_PRELUDE}exec python3 \"$@\"\n"),
            "python3".into(),
        ];
        if pytest {
            args.extend(["-m", "pytest", "-q", "-p", "no:cacheprovider"].map(String::from));
        }
        args.push(file.display().to_string());
        ("sh", args)
    } else {
        // `dummynet install` writes into /usr/local: a tmpfs over its bin
        // and share, seen only in this block's mount namespace.
        let install = if body.contains("dummynet install") {
            "mount -t tmpfs dn-docs /usr/local/bin\nmount -t tmpfs dn-docs /usr/local/share\n"
        } else {
            ""
        };
        let daemon = match (block.daemon, block.http) {
            (_, true) => format!("DN_DOCS_HTTP='--http 127.0.0.1:8080'\n{DAEMON_PRELUDE}"),
            (true, false) => format!("DN_DOCS_HTTP=\n{DAEMON_PRELUDE}"),
            (false, false) => String::new(),
        };
        (
            "sh",
            vec![
                "-c".into(),
                format!("{LIVE_PRELUDE}{install}{daemon}{body}\n"),
            ],
        )
    };
    if block.lang == "python" && !installed && body.contains("def test_") {
        args.insert(args.len() - 1, "-p".into());
        args.insert(args.len() - 1, "dummynet.pytest_plugin".into());
    }
    let path = format!(
        "{}:{}:{}",
        stand_ins.display(),
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Output to a file, not a pipe: a server a block left running must not
    // keep the test waiting for the pipe's end; whatever is still running
    // in the namespace afterwards is killed.
    let log_path = sandbox.dir.join(".output");
    let log = std::fs::File::create(&log_path).expect("the output file");
    let status = Command::new("timeout")
        .args([
            "-k",
            "5",
            "180",
            "ip",
            "netns",
            "exec",
            &sandbox.netns,
            program,
        ])
        .args(&args)
        .current_dir(&sandbox.dir)
        .env("PATH", path)
        .env("PYTHONPATH", root().join("clients/python/src"))
        .env("DUMMYNET_BIN", bin_dir.join("dummynet"))
        .env("DUMMYNET_REQUIRE", "1")
        .env("HOME", &sandbox.dir)
        .env_remove("DUMMYNET_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().expect("the output file"))
        .stderr(log)
        .status();
    if let Ok(pids) = Command::new("ip")
        .args(["netns", "pids", &sandbox.netns])
        .output()
    {
        for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    let status = match status {
        Ok(s) => s,
        Err(e) => return Live::Failed(format!("cannot run: {e}")),
    };
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    if !status.success() {
        Live::Failed(format!("exited with {status}:\n{text}"))
    } else if text.contains("{\"error\":") {
        Live::Failed(format!("an HTTP API error:\n{text}"))
    } else {
        Live::Passed
    }
}
