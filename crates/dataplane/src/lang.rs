//! The seam with `dummynet-lang`: the only place that knows its API, so a
//! change there is mended here.

use std::path::{Path, PathBuf};

use dummynet_engine::{Command, Engine, Payload, Snapshot};

use crate::Carrier;
use dummynet_lang::Statement;

/// The commands of a configuration file with their line numbers, in file
/// order, or the line of the first error and the error. `show` statements
/// are skipped: at time 0 there is nothing to show, and `sim` prints the
/// final state itself. What the parser took as written but doubts (`bw
/// 10` is 10 bit/s) is printed as a warning with its line, as the daemon
/// answers it for a command typed live.
pub fn commands(
    text: &str,
    base_dir: Option<&Path>,
) -> Result<Vec<(usize, Command)>, (usize, String)> {
    let parsed =
        dummynet_lang::parse_file(text, base_dir).map_err(|e| (e.line, e.error.to_string()))?;
    for (line, p) in &parsed {
        for note in &p.notes {
            say!("dummynet: config line {line}: warning: {note}");
        }
    }
    Ok(parsed
        .into_iter()
        .filter_map(|(line, p)| match p.statement {
            Statement::Apply(cmd) => Some((line, cmd)),
            Statement::Show(_) | Statement::Nop(_) => None,
        })
        .collect())
}

/// Why a configuration file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The parser's words for the first line it refused (1-based).
    #[error("{}:{line}: {message}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The configuration's commands, or an error naming the file and line.
pub fn load_config(path: &Path) -> Result<Vec<(usize, Command)>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    commands(&text, path.parent()).map_err(|(line, message)| LoadError::Line {
        path: path.to_path_buf(),
        line,
        message,
    })
}

/// The live data plane's engine with the configuration applied at time 0,
/// or the line of the first command it refused and why. Not generic, so the
/// engine's configuration code is compiled once, here, for every caller.
pub fn configure(
    config: &[(usize, Command)],
    seed: u64,
) -> Result<Engine<Carrier>, (usize, String)> {
    configure_for(config, seed)
}

/// [`configure`] for an engine of any payload (the simulator, tests).
pub fn configure_for<P: Payload>(
    config: &[(usize, Command)],
    seed: u64,
) -> Result<Engine<P>, (usize, String)> {
    let mut engine = Engine::new(seed);
    for (line, cmd) in config {
        engine
            .apply(0, cmd.clone())
            .map_err(|e| (*line, e.to_string()))?;
        for note in engine.take_notes() {
            say!("dummynet: config line {line}: warning: {note}");
        }
    }
    Ok(engine)
}

/// `ipfw show` (with counters) then `ipfw pipe show`, for every rule and pipe.
pub fn final_state(snap: &Snapshot) -> String {
    let mut s = dummynet_lang::format_rules(snap, &[], true, false);
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&dummynet_lang::format_pipes(snap, &[]));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing file and a bad line are refused with the path (and the
    /// line), in the words `run` and `sim` have always printed.
    #[test]
    fn a_config_that_cannot_load_says_where() {
        let dir = std::env::temp_dir().join(format!("dummynet-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("none.conf");
        let e = load_config(&missing).unwrap_err();
        assert!(matches!(&e, LoadError::Read { path, source }
            if *path == missing && source.kind() == std::io::ErrorKind::NotFound));
        assert!(e
            .to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())));
        let bad = dir.join("bad.conf");
        std::fs::write(&bad, "pipe 1 config bw 1Mbit/s\npipe 2 config nonsense\n").unwrap();
        let e = load_config(&bad).unwrap_err();
        assert!(matches!(&e, LoadError::Line { line: 2, .. }), "{e:?}");
        assert!(
            e.to_string().starts_with(&format!("{}:2: ", bad.display())),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
