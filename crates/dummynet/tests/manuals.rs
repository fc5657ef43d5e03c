//! `dummynet install` puts man pages and shell completions beside the binary
//! and its `ipfw`/`dnctl` links, and `--uninstall` takes them all away. The
//! files are snapshots kept in docs/generated/ (what a packager or a reader
//! of the repository sees), so a change of the command line that changes
//! them shows in review: `DUMMYNET_DOCS_BLESS=1` rewrites the snapshots.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_dummynet");

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/generated")
}

/// Every file under `dir`, as paths relative to it, sorted.
fn tree(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.expect("an entry").path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).expect("under base").to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn install(dir: &Path, extra: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("install")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .output()
        .expect("install runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "dummynet install {extra:?}: {text}");
    text
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("dn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TempDir(dir)
}

#[test]
fn installed_man_pages_and_completions_match_their_snapshots() {
    let t = temp("manuals");
    install(&t.0.join("bin"), &[]);
    let share = t.0.join("share");
    let installed = tree(&share);
    let names: Vec<String> = installed.iter().map(|p| p.display().to_string()).collect();
    for expected in [
        "man/man8/dummynet.8",
        "man/man8/dummynet-run.8",
        "man/man8/dummynet-sim.8",
        "man/man7/dummynet-language.7",
        "bash-completion/completions/dummynet",
        "zsh/site-functions/_dummynet",
        "fish/vendor_completions.d/dummynet.fish",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let snap = snapshots().join("share");
    if std::env::var_os("DUMMYNET_DOCS_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&snap);
        for rel in &installed {
            let to = snap.join(rel);
            std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
            std::fs::copy(share.join(rel), &to).expect("copy");
        }
    }
    assert_eq!(
        installed,
        tree(&snap),
        "the files install writes against docs/generated/share (DUMMYNET_DOCS_BLESS=1 rewrites it)"
    );
    for rel in &installed {
        let now = std::fs::read(share.join(rel)).expect("installed file");
        let kept = std::fs::read(snap.join(rel)).expect("snapshot");
        assert!(
            now == kept,
            "{} differs from its snapshot in docs/generated/share (DUMMYNET_DOCS_BLESS=1 rewrites it)",
            rel.display()
        );
    }
    // Every subcommand has its page.
    let help = Command::new(BIN).arg("--help").output().expect("help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    for sub in help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
    {
        let page = format!("man/man8/dummynet-{sub}.8");
        assert!(names.contains(&page), "no {page}");
    }
}

#[test]
fn uninstall_removes_what_install_put_and_nothing_else() {
    let t = temp("uninstall");
    let bin = t.0.join("bin");
    install(&bin, &[]);
    let share = t.0.join("share");
    assert!(bin.join("dummynet").is_file());
    assert!(!tree(&share).is_empty());
    let other = share.join("man/man8/someone-else.8");
    std::fs::write(&other, "not ours").expect("write");
    let said = install(&bin, &["--uninstall"]);
    assert!(said.contains("removed"), "{said}");
    for name in ["dummynet", "ipfw", "dnctl"] {
        assert!(
            std::fs::symlink_metadata(bin.join(name)).is_err(),
            "{name} is still there"
        );
    }
    assert_eq!(tree(&share), vec![PathBuf::from("man/man8/someone-else.8")]);
    // Again: nothing left to remove is not an error.
    install(&bin, &["--uninstall"]);
}
