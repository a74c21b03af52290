//! Bounded reading of input files: every file scanledger reads as input (contracts, replay
//! files, receipts given to `verify`) goes through here.
//!
//! A size bound is enforced while reading (`Read::take(max + 1)`), never by the size the file
//! states, so a pipe, `/dev/zero` or a file that grows cannot make a reader run without end:
//! at most `max + 1` bytes are read, and one byte past the bound is the error
//! "FILE is larger than N bytes". Nothing here allocates from a stated size past the bound.
//!
//! Which kinds of file each reader takes:
//! - [`read_text`] (contracts, receipts): any readable file but a directory. A FIFO or
//!   `/dev/stdin` works (read once, bounded); opening a FIFO waits for its writer, as any
//!   reader of a FIFO does.
//! - [`open_regular`] (replay files, read again later by offsets): regular files only,
//!   checked before opening, so a FIFO or a device is refused without blocking on it. (The
//!   replay index bounds each line itself, as it finds lines in its reader's buffer.)

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads a whole file as UTF-8 text, refusing it when it holds more than `max_bytes`.
///
/// # Errors
/// `TooLarge` past the bound (whatever the stated size), `Directory`, `NotUtf8`, `Io`.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, FileError> {
    let file = File::open(path).map_err(io_error(path))?;
    let meta = file.metadata().map_err(io_error(path))?;
    if meta.is_dir() {
        return Err(FileError::Directory {
            path: path.to_owned(),
        });
    }
    // The stated size only sizes the first allocation, and never past the bound.
    let capacity = usize::try_from(meta.len().min(max_bytes).saturating_add(1)).unwrap_or(0);
    let mut buf = Vec::with_capacity(capacity);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(io_error(path))?;
    if buf.len() as u64 > max_bytes {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            max_bytes,
        });
    }
    String::from_utf8(buf).map_err(|_| FileError::NotUtf8 {
        path: path.to_owned(),
    })
}

/// Opens a regular file of at most `max_bytes` and returns it with its size. The kind of
/// file is checked before opening, so a FIFO is refused rather than waited on; `why` says
/// why the caller needs a regular file.
///
/// The size is checked once here; a caller reading the file later still bounds each read.
///
/// # Errors
/// `Directory`, `NotRegular`, `TooLarge`, `Io`.
pub(crate) fn open_regular(
    path: &Path,
    max_bytes: u64,
    why: &'static str,
) -> Result<(File, u64), FileError> {
    let kind = std::fs::metadata(path).map_err(io_error(path))?;
    let check = |meta: &std::fs::Metadata| {
        if meta.is_dir() {
            return Err(FileError::Directory {
                path: path.to_owned(),
            });
        }
        if !meta.is_file() {
            return Err(FileError::NotRegular {
                path: path.to_owned(),
                why,
            });
        }
        if meta.len() > max_bytes {
            return Err(FileError::TooLarge {
                path: path.to_owned(),
                max_bytes,
            });
        }
        Ok(())
    };
    check(&kind)?;
    let file = File::open(path).map_err(io_error(path))?;
    // Checked again on the open file: the path may have changed in between.
    let meta = file.metadata().map_err(io_error(path))?;
    check(&meta)?;
    Ok((file, meta.len()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[test]
    fn text_files_are_bounded_by_what_they_hold() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_text(&p, 10).unwrap(), "0123456789");
        assert!(matches!(
            read_text(&p, 9),
            Err(FileError::TooLarge { max_bytes: 9, .. })
        ));
        let e = read_text(dir.path(), 10).unwrap_err();
        assert!(matches!(e, FileError::Directory { .. }), "{e}");
        std::fs::write(&p, b"\xff\xfe").unwrap();
        assert!(matches!(read_text(&p, 10), Err(FileError::NotUtf8 { .. })));
        let e = read_text(&dir.path().join("nope"), 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot read {}", dir.path().join("nope").display())
        );
    }

    #[cfg(unix)]
    #[test]
    fn endless_devices_stop_at_the_bound() {
        let zero = Path::new("/dev/zero");
        let e = read_text(zero, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "/dev/zero is larger than 1048576 bytes");
        let e = open_regular(zero, 1 << 20, "test").unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
    }

    #[test]
    fn regular_files_are_checked_before_opening() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, b"12345").unwrap();
        assert_eq!(open_regular(&p, 5, "test").unwrap().1, 5);
        assert!(matches!(
            open_regular(&p, 4, "test"),
            Err(FileError::TooLarge { .. })
        ));
        assert!(matches!(
            open_regular(dir.path(), 4, "test"),
            Err(FileError::Directory { .. })
        ));
    }
}

/// An input file that could not be read within its bound (`io_bound`): contracts, replay
/// files, receipts given to `verify`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file holds more than the bound; found while reading, whatever its stated size.
    #[error("{path} is larger than {max_bytes} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        max_bytes: u64,
    },
    /// A directory where a file is expected.
    #[error("{path} is a directory, not a file")]
    Directory {
        /// The path.
        path: PathBuf,
    },
    /// Not a regular file where one is needed (a replay file is read by offsets, so a pipe
    /// or a device cannot serve it).
    #[error("{path} is not a regular file; {why}")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// Why a regular file is needed.
        why: &'static str,
    },
    /// The bytes are not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The file changed while it was being read by offsets.
    #[error(
        "{path} changed while it was being read ({was_bytes} bytes when opened, {now_bytes} now)"
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// Its size when opened.
        was_bytes: u64,
        /// Its size now.
        now_bytes: u64,
    },
    /// Opening or reading failed.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl FileError {
    /// The file at fault.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        match self {
            FileError::TooLarge { path, .. }
            | FileError::Directory { path }
            | FileError::NotRegular { path, .. }
            | FileError::NotUtf8 { path }
            | FileError::Changed { path, .. }
            | FileError::Io { path, .. } => path,
        }
    }
}
