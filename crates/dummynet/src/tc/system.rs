//! The system's own tc, for what dummynet does not emulate (`tc filter`,
//! `class`, other qdiscs, netem under a class...), and for `tc qdisc show`'s
//! lines of the interfaces dummynet does not shape.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::Refusal;

/// The first `tc` on PATH (then /usr/sbin, /sbin) that is not this
/// program under another name.
pub(crate) fn find() -> Option<PathBuf> {
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join("tc"))
        .find(|c| {
            let Ok(real) = c.canonicalize() else {
                return false;
            };
            use std::os::unix::fs::PermissionsExt;
            let runnable = std::fs::metadata(&real)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            runnable
                && Some(&real) != me.as_ref()
                && real.file_name() != Some(std::ffi::OsStr::new("dummynet"))
        })
}

/// `args` (dummynet's `--netns NAME` written as tc's `-n NAME`).
fn tc_args(args: &[String], netns: Option<&str>) -> Vec<String> {
    match args {
        [o, _, rest @ ..] if o == "--netns" => ["-n", netns.unwrap_or_default()]
            .into_iter()
            .map(String::from)
            .chain(rest.iter().cloned())
            .collect(),
        _ => args.to_vec(),
    }
}

/// Runs the system's tc on the command line as it was given; `why` says
/// what dummynet does not emulate, for when there is no tc to run or it
/// fails.
pub(crate) fn hand_over(
    args: &[String],
    netns: Option<&str>,
    why: &str,
) -> Result<ExitCode, Refusal> {
    let Some(tc) = find() else {
        return Err(Refusal {
            status: 1,
            message: format!("{why}; and there is no system tc to hand it to"),
        });
    };
    let status = std::process::Command::new(&tc)
        .args(tc_args(args, netns))
        .status()
        .map_err(|e| Refusal::kernel(format!("{why}; running {}: {e}", tc.display())))?;
    match status.code() {
        Some(0) => Ok(ExitCode::SUCCESS),
        code => {
            eprintln!("{why}, so the command went to {}", tc.display());
            Ok(ExitCode::from(
                code.and_then(|c| u8::try_from(c).ok()).unwrap_or(1),
            ))
        }
    }
}

/// What the system's tc prints for `args` (empty if there is none, or it
/// fails).
pub(crate) fn output(args: &[String]) -> String {
    let Some(tc) = find() else {
        return String::new();
    };
    run_quietly(&tc, args)
}

fn run_quietly(tc: &Path, args: &[String]) -> String {
    std::process::Command::new(tc)
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dummynets_netns_option_becomes_tcs() {
        let a = |w: &str| w.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            tc_args(&a("--netns x filter show"), Some("x")),
            a("-n x filter show")
        );
        assert_eq!(tc_args(&a("filter show"), None), a("filter show"));
    }
}
