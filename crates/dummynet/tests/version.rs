//! `dummynet --version`: the crate's version and, in a git checkout, the
//! commit it was built from (build.rs), kept current as HEAD moves.

use std::process::Command;

#[test]
fn version_names_the_release_and_the_commit_built() {
    let out = Command::new(env!("CARGO_BIN_EXE_dummynet"))
        .arg("--version")
        .output()
        .expect("run dummynet --version");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let line = text.trim_end();
    let want = format!("dummynet {}", env!("CARGO_PKG_VERSION"));
    assert!(
        line.starts_with(&want),
        "{line:?} should start with {want:?}"
    );

    // Built from a git checkout (and not told a commit by a packager): the
    // commit must be HEAD's, not one from an earlier build.
    let head = Command::new("git")
        .args(["rev-parse", "--short=10", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    let packager = option_env!("DUMMYNET_COMMIT").is_some_and(|c| !c.trim().is_empty());
    if let (Ok(head), false) = (head, packager) {
        if head.status.success() {
            let hash = String::from_utf8_lossy(&head.stdout).trim().to_string();
            assert!(
                line.starts_with(&format!("{want} ({hash} ")),
                "{line:?} should name HEAD ({hash}) and its date"
            );
        }
    }
}
