//! Writing a file so that it is either absent, or old, or whole: write
//! `FILE.tmp`, flush it to disk, rename it over `FILE`, flush the
//! directory. A failure at any step removes `FILE.tmp` and leaves `FILE` as
//! it was, so a partial checkpoint is never taken for a valid one.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Buffer between the closure's writes and the file.
const BUFFER_LEN: usize = 1 << 20;

/// Why an atomic write failed; `FILE` is untouched in every case.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError<E: std::error::Error + 'static> {
    #[error("cannot create {}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {} failed", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: E,
    },
    #[error("cannot flush {} to disk", .path.display())]
    Sync {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot rename {} to {}", .from.display(), .to.display())]
    Rename {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Removes the temporary file unless disarmed (also when `write` panics).
struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `FILE.tmp` for `FILE`.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Runs `write` on a buffered `FILE.tmp`, then makes it `path` atomically
/// and durably. On any error `path` is left as it was and `FILE.tmp` is
/// removed.
pub fn write_atomically<T, E, F>(path: &Path, write: F) -> Result<T, AtomicWriteError<E>>
where
    E: std::error::Error + 'static,
    F: FnOnce(&mut BufWriter<File>) -> Result<T, E>,
{
    let tmp = temp_path(path);
    let sync_err = |source| AtomicWriteError::Sync {
        path: tmp.clone(),
        source,
    };
    let file = File::create(&tmp).map_err(|source| AtomicWriteError::Create {
        path: tmp.clone(),
        source,
    })?;
    let mut guard = TempFile {
        path: tmp.clone(),
        armed: true,
    };
    let mut out = BufWriter::with_capacity(BUFFER_LEN, file);
    let value = write(&mut out).map_err(|source| AtomicWriteError::Write {
        path: tmp.clone(),
        source,
    })?;
    out.flush().map_err(sync_err)?;
    let file = out.into_inner().map_err(|e| sync_err(e.into_error()))?;
    file.sync_all().map_err(sync_err)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|source| AtomicWriteError::Rename {
        from: tmp.clone(),
        to: path.to_path_buf(),
        source,
    })?;
    guard.armed = false;
    sync_parent(path).map_err(|source| AtomicWriteError::Sync {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(value)
}

/// Makes the rename durable.
fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}
