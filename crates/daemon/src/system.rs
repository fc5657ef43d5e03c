//! What the daemon asks of the system in more than one place: where its
//! run-time state lives, and where a program it runs is.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where dummynet keeps its run-time state (control sockets, the shells'
/// records of forwarding): `/run/dummynet`, or the user's own directory
/// once [`crate::shell::rootless::enter`] has run.
pub fn runtime_dir() -> &'static Path {
    static ROOT: &str = "/run/dummynet";
    USER_DIR.get().map_or(Path::new(ROOT), PathBuf::as_path)
}

/// The user's own run-time directory, set by `rootless::enter`.
pub(crate) static USER_DIR: OnceLock<PathBuf> = OnceLock::new();

/// $PATH, then the sbin directories a user's $PATH often lacks.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for d in ["/usr/sbin", "/sbin", "/usr/local/sbin"] {
        if !dirs.iter().any(|x| x == Path::new(d)) {
            dirs.push(PathBuf::from(d));
        }
    }
    dirs
}

/// The first `name` in [`search_dirs`] that is a file.
pub fn find_program(name: &str) -> Option<PathBuf> {
    search_dirs()
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
