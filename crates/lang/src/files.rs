//! Files named by a command: delay profiles, traces, distribution tables.
//!
//! The daemon parses commands from its control socket, so a file named in
//! one is whatever a client typed: `/dev/zero` (endless), a FIFO or a
//! terminal (blocks until someone writes), or a huge log. Only regular
//! files are read, and only up to [`MAX_FILE_BYTES`]; anything else is an
//! error that says why, never a hang or an allocation without bound.

use std::io::Read;
use std::path::Path;

use crate::context::Context;
use crate::error::{ErrorKind, ParseError};
use crate::lexer::{Cursor, Token};

/// The largest file a command may name. A mahimahi trace of an hour at
/// 100 Mbit/s is about 40 MB of text; profiles and `.dist` tables are a
/// few kilobytes. 16 MiB is generous for the tables and profiles this
/// reads while bounding what one typo can cost.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Refuses when the command came from a caller who may not have files
/// read on its behalf (see `parse_args_untrusted`), before anything about
/// the file is looked at.
pub(crate) fn check_allowed(
    cur: &Cursor<'_>,
    t: Token<'_>,
    ctx: Context<'_>,
    what: &str,
) -> Result<(), ParseError> {
    if ctx.refuse_files {
        return Err(cur.error_at(
            t,
            ErrorKind::File,
            format!(
                "a {what} file named over the control socket is opened with \
                 the caller's rights, which this daemon cannot take (it does not \
                 run as root): only root or the daemon's own user may name one"
            ),
        ));
    }
    Ok(())
}

/// Reads the file at `path` for the token `t` (a `what`: "profile",
/// "trace", ...), with an error at `t` if it is refused or unreadable.
pub(crate) fn read_named(
    cur: &Cursor<'_>,
    t: Token<'_>,
    ctx: Context<'_>,
    path: &Path,
    what: &str,
) -> Result<String, ParseError> {
    check_allowed(cur, t, ctx, what)?;
    read_limited(path, MAX_FILE_BYTES).map_err(|why| {
        cur.error_at(
            t,
            ErrorKind::File,
            format!("cannot read {what} `{}`: {why}", path.display()),
        )
    })
}

/// Why a file named by a command was not read; `Display` says it in the
/// words a command's error quotes (without the path, which the caller adds).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no such file")]
    NotFound { source: std::io::Error },
    #[error(
        "permission denied (files named over the control socket are opened \
         with the rights of the user who sent the command)"
    )]
    PermissionDenied { source: std::io::Error },
    /// Any other failure to look at, open or read it.
    #[error("{source}")]
    Io { source: std::io::Error },
    /// It is there but is not a regular file.
    #[error("it is {kind}; only regular files are read")]
    NotRegular { kind: FileKind },
    /// It holds more than `limit` bytes.
    #[error("larger than {} MiB, the most a command may name", limit >> 20)]
    TooLarge { limit: u64 },
    #[error("not text (invalid UTF-8 at byte {})", source.valid_up_to())]
    NotUtf8 { source: std::str::Utf8Error },
}

/// What a path names that is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    /// Anything else that is not a regular file.
    Other,
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        })
    }
}

/// The text of the regular file at `path`, if it holds at most `limit`
/// bytes of UTF-8; else why not.
pub fn read_limited(path: &Path, limit: u64) -> Result<String, ReadError> {
    // Looked at before opening, so that a device is never opened at all:
    // opening one can have effects of its own (a watchdog arms, a tape
    // rewinds), and opening a FIFO for reading waits for a writer.
    let meta = std::fs::metadata(path).map_err(io_error)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    // The size may grow while it is read: read one byte past the limit to
    // tell.
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        source: e.utf8_error(),
    })
}

/// Opens `path` for reading and checks what was opened is a regular file.
///
/// Something else may be swapped in between [`read_limited`]'s look and
/// this open: a FIFO opened with O_NONBLOCK returns at once, a terminal
/// does not become the daemon's (O_NOCTTY), and the descriptor itself is
/// checked (fstat). Symbolic links are followed (no O_NOFOLLOW): a file
/// named over the socket is opened with its caller's own credentials, so a
/// link reaches nothing the caller could not read, and an operator's
/// configuration links keep working.
fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_error)?;
    let meta = file.metadata().map_err(io_error)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok((file, meta))
}

fn io_error(source: std::io::Error) -> ReadError {
    match source.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound { source },
        std::io::ErrorKind::PermissionDenied => ReadError::PermissionDenied { source },
        _ => ReadError::Io { source },
    }
}

fn not_regular(meta: &std::fs::Metadata) -> ReadError {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_dir() {
        FileKind::Directory
    } else if t.is_fifo() {
        FileKind::Fifo
    } else if t.is_char_device() {
        FileKind::CharDevice
    } else if t.is_block_device() {
        FileKind::BlockDevice
    } else if t.is_socket() {
        FileKind::Socket
    } else {
        FileKind::Other
    };
    ReadError::NotRegular { kind }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("dummynet-lang-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn dev_zero_is_refused_at_once_as_a_device() {
        let e = read_limited(Path::new("/dev/zero"), MAX_FILE_BYTES).unwrap_err();
        assert!(matches!(
            e,
            ReadError::NotRegular {
                kind: FileKind::CharDevice
            }
        ));
        let e = e.to_string();
        assert!(e.contains("a character device"), "{e}");
        assert!(e.contains("only regular files"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = scratch("fifo");
        let fifo = dir.join("p");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("note: mkfifo unavailable; test skipped");
            return;
        }
        // Were it opened, this would block forever: nobody writes.
        let e = read_limited(&fifo, MAX_FILE_BYTES).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A FIFO swapped in after the look (here: never looked at) is still
    /// opened without waiting for a writer, and refused for what it is.
    #[test]
    fn a_fifo_that_passed_the_look_does_not_block_the_open() {
        let dir = scratch("fifo-open");
        let fifo = dir.join("p");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("note: mkfifo unavailable; test skipped");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(open_regular(&path).map(|_| ()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(5));
        // Unblock a blocked open (so the thread ends) before failing.
        if got.is_err() {
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        }
        let e = got
            .expect("open of a FIFO blocked")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a FIFO"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_one_at_it_is_read() {
        let dir = scratch("limit");
        let path = dir.join("big");
        std::fs::write(&path, "x".repeat(1025)).unwrap();
        let e = read_limited(&path, 1024).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { limit: 1024 }));
        let e = e.to_string();
        assert!(e.contains("larger than"), "{e}");
        std::fs::write(&path, "x".repeat(1024)).unwrap();
        assert_eq!(read_limited(&path, 1024).unwrap().len(), 1024);
        let e = read_limited(&dir, 1024).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let e = read_limited(&dir.join("none"), 1024).unwrap_err();
        assert!(matches!(&e, ReadError::NotFound { .. }));
        let e = e.to_string();
        assert_eq!(e, "no such file");
        std::fs::write(&path, b"ok\xff").unwrap();
        let e = read_limited(&path, 1024).unwrap_err().to_string();
        assert_eq!(e, "not text (invalid UTF-8 at byte 2)");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_profile_named_by_an_untrusted_caller_is_refused_unread() {
        let args: Vec<String> = "pipe 1 config profile /dev/zero"
            .split(' ')
            .map(String::from)
            .collect();
        let e = crate::parse_args_untrusted(&args, None).unwrap_err();
        assert!(
            e.to_string().contains("only root or the daemon's own user"),
            "{e}"
        );
        // Trusted, it is read, and /dev/zero is refused for what it is.
        let e = crate::parse_args_in(&args, None).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        // A command naming no file parses either way.
        let ok: Vec<String> = ["pipe", "1", "config", "bw", "1Mbit/s"]
            .map(String::from)
            .to_vec();
        assert!(crate::parse_args_untrusted(&ok, None).is_ok());
    }
}
