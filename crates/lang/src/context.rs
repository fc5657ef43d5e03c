//! What a command line is parsed in: where the files it names are looked
//! up, which tool it was given to, and whether it may name files at all.

use std::path::Path;

/// Where files named by a command (delay profiles, traces) are looked up.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Context<'p> {
    pub base_dir: Option<&'p Path>,
    /// The line was given to `dnctl`, dummynet's own tool, whose `flush`
    /// and `show` are about pipes, not rules.
    pub dnctl: bool,
    /// Files may not be named: the caller is not root (see
    /// [`crate::parse_args_untrusted`]).
    pub refuse_files: bool,
}
