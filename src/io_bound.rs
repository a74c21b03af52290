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
//!   checked before opening, so a FIFO or a device is refused without blocking on it.
//! - [`read_line`]: one line of a buffered reader, bounded by a length.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

use crate::error::FileError;

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

/// One line read by [`read_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// No byte was left.
    End,
    /// A line was appended to the buffer, without its `\n`; `consumed_bytes` counts the
    /// `\n` too.
    Line {
        /// Bytes taken from the reader.
        consumed_bytes: usize,
    },
    /// The line is longer than the bound; the buffer got its first `max_bytes + 1` bytes
    /// and the reader is left inside the line.
    TooLong,
}

/// Appends one line (up to and including `\n`, or to the end) to `buf`, reading at most
/// `max_bytes + 1` bytes whatever the input holds; the `\n` is not kept.
///
/// # Errors
/// The reader's IO errors.
pub(crate) fn read_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max_bytes: usize,
) -> io::Result<LineRead> {
    let start = buf.len();
    let limit = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let consumed_bytes = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    if consumed_bytes == 0 {
        return Ok(LineRead::End);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() - start > max_bytes {
        return Ok(LineRead::TooLong);
    }
    Ok(LineRead::Line { consumed_bytes })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[track_caller]
    fn check_lines(input: &[u8], max_bytes: usize, want: &[Result<&[u8], ()>]) {
        let mut reader = input;
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            buf.clear();
            match read_line(&mut reader, &mut buf, max_bytes).unwrap() {
                LineRead::End => break,
                LineRead::Line { .. } => got.push(Ok(buf.clone())),
                LineRead::TooLong => {
                    assert_eq!(buf.len(), max_bytes + 1, "reads one byte past the bound");
                    got.push(Err(()));
                    break;
                }
            }
        }
        let want: Vec<Result<Vec<u8>, ()>> = want.iter().map(|w| w.map(<[u8]>::to_vec)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn lines_are_bounded_while_read() {
        check_lines(b"ab\ncd", 2, &[Ok(b"ab"), Ok(b"cd")]);
        check_lines(b"ab\ncd\n", 2, &[Ok(b"ab"), Ok(b"cd")]);
        check_lines(b"abc\n", 2, &[Err(())]);
        check_lines(b"ab\nabc", 2, &[Ok(b"ab"), Err(())]);
        check_lines(b"\n\n", 0, &[Ok(b""), Ok(b"")]);
        check_lines(b"", 5, &[]);
        // Lines are appended: the bound is on the line, not on the buffer.
        let mut reader: &[u8] = b"ab\ncd\n";
        let mut buf = b"xyz".to_vec();
        read_line(&mut reader, &mut buf, 2).unwrap();
        read_line(&mut reader, &mut buf, 2).unwrap();
        assert_eq!(buf, b"xyzabcd");
        // An endless input stops one byte past the bound.
        let mut zeros = io::BufReader::new(io::repeat(0));
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut zeros, &mut buf, 1000).unwrap(),
            LineRead::TooLong
        );
    }

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
