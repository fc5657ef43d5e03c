//! Records the git commit the binary is built from, for `dummynet --version`.
//!
//! `DUMMYNET_COMMIT` (set by a packager building from a tarball) wins over
//! git; with neither, the version is the crate's alone.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=DUMMYNET_COMMIT");
    let commit = std::env::var("DUMMYNET_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves: HEAD itself (a branch switch) and the
            // file of the branch it names (a commit), wherever this
            // checkout (or worktree) keeps them. Only files that exist: cargo
            // reruns a script whose watched file is missing at every build.
            let branch = git(&["symbolic-ref", "-q", "HEAD"]);
            let watched = ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref());
            for name in watched {
                if let Some(p) = git(&["rev-parse", "--git-path", name]).map(PathBuf::from) {
                    if p.exists() {
                        println!("cargo:rerun-if-changed={}", p.display());
                    }
                }
            }
            let hash = git(&["rev-parse", "--short=10", "HEAD"])?;
            let date = git(&["log", "-1", "--format=%cs", "HEAD"]);
            Some(match date {
                Some(d) => format!("{hash} {d}"),
                None => hash,
            })
        });
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let long = match commit {
        Some(c) => format!("{version} ({})", c.trim()),
        None => version,
    };
    println!("cargo:rustc-env=DUMMYNET_VERSION={long}");
}
