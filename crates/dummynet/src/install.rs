//! `dummynet install`: puts the binary on the PATH with its two other
//! names, `ipfw` and `dnctl` (symbolic links), so scripts written for
//! FreeBSD run as they are.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Directory for `dummynet`, `ipfw` and `dnctl`.
    #[arg(long, default_value = "/usr/local/bin")]
    pub dir: PathBuf,
}

pub fn run(args: InstallArgs) -> ExitCode {
    match install(&args.dir) {
        Ok(()) => {
            println!(
                "installed {0}/dummynet with links {0}/ipfw and {0}/dnctl",
                args.dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dummynet install: {e}");
            ExitCode::FAILURE
        }
    }
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
