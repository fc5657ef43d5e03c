//! `dummynet install --tc-shim DIR`: a `tc` in DIR that is this binary
//! (a symbolic link to it), for DIR first on the PATH of a container or a
//! CI job: netem and tbf go to dummynet, the rest to the system's tc,
//! which the shim finds further along the PATH.

use std::path::{Path, PathBuf};

/// `dummynet install --tc-shim DIR [--uninstall]`.
pub fn run(dir: &Path, uninstall: bool) -> std::process::ExitCode {
    let done = if uninstall {
        self::uninstall(dir).map(|gone| {
            if gone {
                println!("removed {}", dir.join("tc").display());
            }
        })
    } else {
        install(dir).map(|link| {
            println!(
                "installed {} (put {} first on PATH)",
                link.display(),
                dir.display()
            )
        })
    };
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dummynet install: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Makes DIR/tc a link to this binary (replacing a link of ours, never
/// someone else's file); returns the link.
pub fn install(dir: &Path) -> Result<PathBuf, String> {
    let me = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find this binary: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let link = dir.join("tc");
    if std::fs::symlink_metadata(&link).is_ok() {
        if !ours(&link) {
            return Err(format!(
                "{} exists and is not a link to dummynet; remove it or choose another DIR",
                link.display()
            ));
        }
        std::fs::remove_file(&link).map_err(|e| format!("{}: {e}", link.display()))?;
    }
    std::os::unix::fs::symlink(&me, &link)
        .map_err(|e| format!("linking {}: {e}", link.display()))?;
    Ok(link)
}

/// Removes DIR/tc if it is a link to a dummynet binary.
pub fn uninstall(dir: &Path) -> Result<bool, String> {
    let link = dir.join("tc");
    if !ours(&link) {
        return Ok(false);
    }
    std::fs::remove_file(&link).map_err(|e| format!("removing {}: {e}", link.display()))?;
    Ok(true)
}

fn ours(link: &Path) -> bool {
    std::fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink())
        && std::fs::read_link(link)
            .is_ok_and(|t| t.file_name() == Some(std::ffi::OsStr::new("dummynet")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_is_a_link_to_this_binary_and_never_replaces_a_real_tc() {
        let dir = std::env::temp_dir().join(format!("dn-tc-shim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let link = install(&dir).unwrap();
        assert_eq!(
            link.canonicalize().unwrap(),
            std::env::current_exe().unwrap().canonicalize().unwrap()
        );
        // Test binaries are not named dummynet: uninstall leaves this one.
        assert!(!uninstall(&dir).unwrap());
        std::fs::remove_file(&link).unwrap();
        std::fs::write(&link, "a real tc").unwrap();
        let e = install(&dir).unwrap_err();
        assert!(e.contains("not a link to dummynet"), "{e}");
        assert!(!uninstall(&dir).unwrap());
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "a real tc");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
