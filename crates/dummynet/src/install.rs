//! `dummynet install`: puts the binary on the PATH with its two other
//! names, `ipfw` and `dnctl` (symbolic links), so scripts written for
//! FreeBSD run as they are, and its man pages and shell completions
//! ([`crate::manuals`]) under the same prefix; `--uninstall` removes them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Directory for `dummynet`, `ipfw` and `dnctl`; the man pages and
    /// completions go under its parent's `share/` (/usr/local/share).
    #[arg(long, default_value = "/usr/local/bin")]
    pub dir: PathBuf,
    /// Remove what `dummynet install --dir DIR` installed instead.
    #[arg(long)]
    pub uninstall: bool,
    /// Only put a `tc` in DIR that is this binary (a link to it): with DIR
    /// first on the PATH, tc's netem and tbf qdiscs go to dummynet and the
    /// rest to the system's tc. With --uninstall, remove that link.
    #[arg(long, value_name = "DIR")]
    pub tc_shim: Option<PathBuf>,
}

/// Installs or uninstalls; `cmd` is the command line's definition, which
/// the man pages and completions are made from.
pub fn run(args: InstallArgs, cmd: &clap::Command) -> ExitCode {
    if let Some(dir) = &args.tc_shim {
        return crate::tc::shim::run(dir, args.uninstall);
    }
    let files = crate::manuals::generate(cmd);
    let prefix = prefix(&args.dir);
    let done = if args.uninstall {
        uninstall(&args.dir, &prefix, &files).map(|removed| {
            println!("removed {removed} files from {}", prefix.display());
        })
    } else {
        install(&args.dir).and_then(|()| {
            write_manuals(&prefix, &files)?;
            println!(
                "installed {0}/dummynet with links {0}/ipfw and {0}/dnctl, {1} man pages \
                 and completions for bash, zsh and fish under {2}/share",
                args.dir.display(),
                files.len() - 3,
                prefix.display()
            );
            Ok(())
        })
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dummynet install: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `/usr/local/bin` → `/usr/local`: where `share/` is.
fn prefix(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

fn write_manuals(prefix: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<(), String> {
    for (rel, bytes) in files {
        let path = prefix.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Removes the binary, our two links (not a file of someone else's in their
/// place) and the man pages and completions; returns how many went.
fn uninstall(dir: &Path, prefix: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<usize, String> {
    let mut paths: Vec<PathBuf> = vec![dir.join("dummynet")];
    for name in ["ipfw", "dnctl"] {
        let link = dir.join(name);
        if std::fs::read_link(&link).is_ok_and(|t| t == Path::new("dummynet")) {
            paths.push(link);
        }
    }
    paths.extend(files.iter().map(|(rel, _)| prefix.join(rel)));
    let mut removed = 0;
    for path in paths {
        match std::fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("removing {}: {e}", path.display())),
        }
    }
    Ok(removed)
}

fn install(dir: &Path) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let target = dir.join("dummynet");
    if me != target {
        // Copy to a temporary name and rename, so a running copy is never
        // half-written.
        let tmp = dir.join(".dummynet.new");
        std::fs::copy(&me, &tmp).map_err(|e| format!("copying to {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &target)
            .map_err(|e| format!("moving into {}: {e}", target.display()))?;
    }
    for name in ["ipfw", "dnctl"] {
        let link = dir.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&link) {
            let ours = meta.file_type().is_symlink()
                && std::fs::read_link(&link).is_ok_and(|t| t == Path::new("dummynet"));
            if !ours {
                return Err(format!(
                    "{} exists and is not our link; remove it or choose --dir",
                    link.display()
                ));
            }
            std::fs::remove_file(&link).map_err(|e| format!("{}: {e}", link.display()))?;
        }
        std::os::unix::fs::symlink("dummynet", &link)
            .map_err(|e| format!("linking {}: {e}", link.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_links_and_refuses_foreign_files() {
        let dir = std::env::temp_dir().join(format!("dn-install-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        install(&dir).unwrap();
        assert!(dir.join("dummynet").is_file());
        assert_eq!(
            std::fs::read_link(dir.join("ipfw")).unwrap(),
            Path::new("dummynet")
        );
        // Again: our own links are replaced.
        install(&dir).unwrap();
        std::fs::remove_file(dir.join("dnctl")).unwrap();
        std::fs::write(dir.join("dnctl"), "someone else's").unwrap();
        let e = install(&dir).unwrap_err();
        assert!(e.contains("not our link"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
