//! Bounded reading of input files: experiment files, MJCF models, meshes, height fields,
//! recorded tables.
//!
//! A path is checked before it is opened: it must be a regular file (a FIFO, a device such
//! as `/dev/zero`, a socket or a directory is refused without being opened, so neither an
//! endless stream nor a writer-less pipe can hang the reader), and its size must be within
//! the caller's limit (see [`crate::limits`]). The read itself goes through
//! [`std::io::Read::take`] with the same limit, so a file that grows while it is read cannot
//! exceed it either.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Why an input file was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFileErrorKind {
    /// Missing or unreadable (permissions, I/O error).
    Io,
    /// Not a regular file (FIFO, device, socket, directory).
    NotRegular,
    /// Larger than the limit.
    TooLarge,
    /// Text expected, but the bytes are not UTF-8.
    NotUtf8,
}

/// An input file that could not be read; the message names the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{}': {message}", path.display())]
pub struct InputFileError {
    /// What went wrong.
    pub kind: InputFileErrorKind,
    /// The file.
    pub path: PathBuf,
    /// Details (the I/O error, the file type, the size and the limit).
    pub message: String,
}

/// What kind of non-regular file `t` is, in words.
fn describe(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Check that `path` is a regular file of at most `limit` bytes, without opening it; returns
/// its size (bytes). For readers that take a path themselves (polars).
///
/// # Errors
/// [`InputFileError`] naming `path`: missing or unreadable, not a regular file, too large.
pub fn check(path: &Path, limit: u64) -> Result<u64, InputFileError> {
    let err = |kind, message: String| InputFileError {
        kind,
        path: path.to_path_buf(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(InputFileErrorKind::Io, e.to_string()))?;
    let t = meta.file_type();
    if !t.is_file() {
        return Err(err(
            InputFileErrorKind::NotRegular,
            format!("is {}, not a regular file", describe(&t)),
        ));
    }
    if meta.len() > limit {
        return Err(err(
            InputFileErrorKind::TooLarge,
            format!("is {} bytes, over the limit of {limit} bytes", meta.len()),
        ));
    }
    Ok(meta.len())
}

/// Read all of `path`, at most `limit` bytes ([`check`] first, then a read bounded by
/// [`Read::take`]).
///
/// # Errors
/// [`InputFileError`] naming `path`: missing or unreadable, not a regular file, too large.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, InputFileError> {
    let len = check(path, limit)?;
    let err = |kind, message: String| InputFileError {
        kind,
        path: path.to_path_buf(),
        message,
    };
    let f = std::fs::File::open(path).map_err(|e| err(InputFileErrorKind::Io, e.to_string()))?;
    let mut buf = Vec::with_capacity(len as usize);
    f.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| err(InputFileErrorKind::Io, e.to_string()))?;
    if buf.len() as u64 > limit {
        return Err(err(
            InputFileErrorKind::TooLarge,
            format!("grew past the limit of {limit} bytes while being read"),
        ));
    }
    Ok(buf)
}

/// Read all of `path` as UTF-8 text, at most `limit` bytes (see [`read_bytes`]).
///
/// # Errors
/// As [`read_bytes`], and [`InputFileErrorKind::NotUtf8`] naming the byte offset.
pub fn read_text(path: &Path, limit: u64) -> Result<String, InputFileError> {
    let bytes = read_bytes(path, limit)?;
    String::from_utf8(bytes).map_err(|e| InputFileError {
        kind: InputFileErrorKind::NotUtf8,
        path: path.to_path_buf(),
        message: format!(
            "is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, "hello").unwrap();
        assert_eq!(read_text(&p, 5).unwrap(), "hello");
        let e = read_text(&p, 4).unwrap_err();
        assert_eq!(e.kind, InputFileErrorKind::TooLarge);
        assert!(e.to_string().contains("a.txt") && e.to_string().contains("limit of 4"));
    }

    /// Regression: `/dev/zero` as an input file was read forever.
    #[cfg(unix)]
    #[test]
    fn dev_zero_is_refused_as_a_device() {
        let e = read_bytes(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind, InputFileErrorKind::NotRegular);
        assert!(e.to_string().contains("/dev/zero") && e.to_string().contains("character device"));
    }

    /// Regression: a FIFO as an input file blocked in `open` forever (no writer).
    #[cfg(unix)]
    #[test]
    fn fifo_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pipe.xml");
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        let e = read_text(&p, 1 << 20).unwrap_err();
        assert_eq!(e.kind, InputFileErrorKind::NotRegular);
        assert!(e.to_string().contains("pipe.xml") && e.to_string().contains("FIFO"));
    }

    #[test]
    fn a_directory_and_a_missing_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_bytes(dir.path(), 10).unwrap_err();
        assert_eq!(e.kind, InputFileErrorKind::NotRegular);
        assert!(e.to_string().contains("directory"));
        let e = read_bytes(&dir.path().join("nope"), 10).unwrap_err();
        assert_eq!(e.kind, InputFileErrorKind::Io);
    }
}
