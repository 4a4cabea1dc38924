//! `write_atomically`: a checkpoint file is absent, old or whole, never
//! partial.

mod common;

use std::io::Write;
use std::path::PathBuf;

use common::*;
use vgpu_migration::atomic::temp_path;
use vgpu_migration::*;

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vgpu-migration-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn checkpoint(path: &std::path::Path) -> Result<Summary, AtomicWriteError<WriteError>> {
    let state = rich_state();
    write_atomically(path, |file| {
        let mut w = StreamWriter::new(file)?;
        w.write_state(&state)?;
        for b in state.streamed_buffers() {
            let data = content(b.session, b.buffer, 0, b.size as usize);
            w.write_buffer_chunk(b.session, b.buffer, 0, &data)?;
        }
        Ok(w.finish()?.1)
    })
}

#[test]
fn a_checkpoint_written_atomically_reads_back() {
    let dir = scratch("ok");
    let path = dir.join("vm.ckpt");
    let summary = checkpoint(&path).unwrap();
    assert!(!temp_path(&path).exists());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, summary.stream_bytes);
    assert_eq!(read_all(&bytes).unwrap().state, rich_state());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_failed_write_leaves_no_file_behind() {
    let dir = scratch("fail");
    let path = dir.join("vm.ckpt");
    let err = write_atomically(&path, |file| {
        file.write_all(&[0u8; 100_000]).map_err(WriteError::Io)?;
        // The backend lost the device mid-save, say.
        Err::<(), _>(WriteError::Io(std::io::Error::other("device lost")))
    })
    .unwrap_err();
    assert!(matches!(err, AtomicWriteError::Write { .. }));
    assert!(err.to_string().starts_with("writing "));
    assert!(!path.exists());
    assert!(!temp_path(&path).exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_failed_write_keeps_the_previous_checkpoint() {
    let dir = scratch("keep");
    let path = dir.join("vm.ckpt");
    checkpoint(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = write_atomically(&path, |file| {
        let mut w = StreamWriter::new(file)?;
        w.write_state(&rich_state())?;
        // Finishing before every buffer was written fails.
        w.finish().map(|_| ())
    })
    .unwrap_err();
    assert!(matches!(
        err,
        AtomicWriteError::Write {
            source: WriteError::Buffer(_),
            ..
        }
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!temp_path(&path).exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_panicking_writer_leaves_no_temporary_file() {
    let dir = scratch("panic");
    let path = dir.join("vm.ckpt");
    let result = std::panic::catch_unwind(|| {
        let _ = write_atomically(&path, |file| {
            file.write_all(b"partial").map_err(WriteError::Io)?;
            panic!("simulated crash");
            #[allow(unreachable_code)]
            Ok::<(), WriteError>(())
        });
    });
    assert!(result.is_err());
    assert!(!path.exists());
    assert!(!temp_path(&path).exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_unwritable_directory_is_reported() {
    let path = PathBuf::from("/nonexistent-vgpu-dir/vm.ckpt");
    let err = write_atomically(&path, |_| Ok::<(), WriteError>(())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot create /nonexistent-vgpu-dir/vm.ckpt.tmp"
    );
}
