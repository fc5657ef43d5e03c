//! What the observer writes, and how ([`ObserveOptions`]).

use std::path::PathBuf;

/// Records the channel between the data plane and the observer holds. At
/// about 100 bytes each, 64 K records are about 6.5 MB, and the observer
/// empties the channel every [`IDLE_NAP`](super::thread::IDLE_NAP) at most: at a million packet
/// events a second it is never half full.
pub const DEFAULT_BUFFER: usize = 1 << 16;

/// `--capture-snaplen`'s default: headers, and the start of the payload.
pub const DEFAULT_SNAPLEN: u32 = 256;

/// What [`Observer::start`](super::Observer::start) writes, and how.
#[derive(Debug, Clone)]
pub struct ObserveOptions {
    pub log: Option<PathBuf>,
    pub capture_in: Option<PathBuf>,
    pub capture_out: Option<PathBuf>,
    pub snaplen: u32,
    /// The mahimahi log and the pipe it follows.
    pub mm_log: Option<(PathBuf, u32)>,
    /// The captures' link type.
    pub linktype: u32,
    /// Records the data plane's channel holds ([`DEFAULT_BUFFER`]).
    pub buffer: usize,
}

impl Default for ObserveOptions {
    fn default() -> Self {
        ObserveOptions {
            log: None,
            capture_in: None,
            capture_out: None,
            snaplen: DEFAULT_SNAPLEN,
            mm_log: None,
            linktype: 1,
            buffer: DEFAULT_BUFFER,
        }
    }
}
