//! Why a daemon could not start (`dummynet run`, a shell's emulator, an
//! embedder's): one kind per cause a user acts on differently. The words
//! are the binary's: each kind's `Display` is the line the user reads.

use dummynet_dataplane::host::HostError;
use dummynet_dataplane::observer::ObserverError;
use dummynet_dataplane::sharded::WorkersError;
use dummynet_io::afpacket::PortError;
use dummynet_io::netns::NetnsError;
use dummynet_io::portlock::LockError;
use dummynet_io::userns::UsernsError;

use crate::control::ServerError;

/// Why a daemon, or the emulator of a shell, could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Not root, and no user namespace of its own to run in instead.
    #[error("running without root needs a user namespace: {0}")]
    NotRoot(UsernsError),
    /// An interface to open is not in the namespace the data plane runs in.
    #[error("{error}")]
    NoSuchInterface { name: String, error: PortError },
    /// A port (interface or NFQUEUE) another daemon holds, or whose lock
    /// could not be taken ([`LockError::Held`] names the holder).
    #[error(transparent)]
    PortBusy(LockError),
    /// The control socket's path: a live daemon's, not a socket, or not
    /// usable.
    #[error(transparent)]
    Socket(#[from] ServerError),
    /// A network namespace could not be made, opened or entered; `name`
    /// says which (empty: the words of `source` do).
    #[error("{}{source}", prefix(name))]
    Namespace { name: String, source: NetnsError },
    /// A configuration line the engine refused.
    #[error("config line {line}: {error}")]
    Configuration { line: usize, error: String },
    /// A system call on the way up (a socket pair, a thread, a directory).
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// The user's run-time directory (sockets, records) could not be made,
    /// or is not private: what is wrong with it.
    #[error("{0}")]
    RuntimeDir(String),
    /// Host mode's NFQUEUE or its rules could not be set up.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The observer's files or thread (`--log`, `--pcap`, `--pcapng`).
    #[error(transparent)]
    Observer(#[from] ObserverError),
    /// The channels between a sharded data plane's workers.
    #[error(transparent)]
    Workers(#[from] WorkersError),
    /// Data-plane worker `index` (from 1) could not start.
    #[error("data-plane worker {index}: {source}")]
    Worker {
        index: usize,
        source: Box<StartError>,
    },
    /// A backend could not be opened: its own words (the data plane's
    /// adapters say what and where).
    #[error("{0}")]
    Backend(String),
    /// The data-plane thread ended before saying it was ready.
    #[error("the data plane thread ended during setup")]
    PlaneEnded,
    /// Data-plane worker `index` ended before saying it was ready.
    #[error("data-plane worker {0} ended during setup")]
    WorkerEnded(usize),
}

/// `name: `, or nothing for an unnamed namespace.
fn prefix(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!("{name}: ")
    }
}

impl StartError {
    /// A namespace error with nothing to add to its own words.
    pub fn namespace(source: NetnsError) -> StartError {
        StartError::Namespace {
            name: String::new(),
            source,
        }
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> StartError {
        StartError::Io {
            what: what.into(),
            source,
        }
    }

    /// Whether another daemon holds a port this one needs: `run` exits
    /// with EX_UNAVAILABLE then.
    pub fn is_port_held(&self) -> bool {
        matches!(self, StartError::PortBusy(LockError::Held { .. }))
    }
}

impl From<PortError> for StartError {
    fn from(error: PortError) -> StartError {
        match &error {
            PortError::NoSuchInterface { ifname, .. } => StartError::NoSuchInterface {
                name: ifname.clone(),
                error,
            },
            _ => StartError::Backend(error.to_string()),
        }
    }
}

impl From<LockError> for StartError {
    fn from(error: LockError) -> StartError {
        StartError::PortBusy(error)
    }
}

impl From<String> for StartError {
    fn from(words: String) -> StartError {
        StartError::Backend(words)
    }
}

impl From<&str> for StartError {
    fn from(words: &str) -> StartError {
        StartError::Backend(words.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::errno::Errno;

    #[test]
    fn each_kind_reads_as_the_line_users_saw_before_it_had_one() {
        let missing = || PortError::NoSuchInterface {
            ifname: "nope0".into(),
            errno: Errno::ENODEV,
        };
        let e = StartError::from(missing());
        assert!(matches!(&e, StartError::NoSuchInterface { name, .. } if name == "nope0"));
        assert_eq!(e.to_string(), missing().to_string());
        let e = StartError::Configuration {
            line: 3,
            error: "pipe 0: no such pipe".into(),
        };
        assert_eq!(e.to_string(), "config line 3: pipe 0: no such pipe");
        let e = StartError::io("socketpair", std::io::Error::from(Errno::EMFILE));
        assert!(e.to_string().starts_with("socketpair: "), "{e}");
        let taken = StartError::from(ServerError::Taken("/run/x.sock".into()));
        assert!(!taken.is_port_held());
        assert_eq!(
            taken.to_string(),
            "a dummynet daemon is already listening on /run/x.sock; stop it first or pass --socket PATH"
        );
        let named = StartError::Namespace {
            name: "the emulator's namespace /proc/1/ns/net".into(),
            source: NetnsError::Unshare(std::io::Error::from(Errno::EPERM)),
        };
        assert!(named
            .to_string()
            .starts_with("the emulator's namespace /proc/1/ns/net: creating"));
        assert!(!named.is_port_held());
    }
}
