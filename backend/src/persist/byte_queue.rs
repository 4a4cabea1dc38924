//! A bounded queue of bytes between the thread that writes a pre-copy
//! stream and the front-end that asks for it a slice at a time: the writer
//! blocks while the queue holds `CAPACITY`, so a stream of a gigabyte never
//! sits in memory twice (its staged buffers already do once).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The most bytes written and not yet taken.
const CAPACITY: usize = 16 << 20;

#[derive(Default)]
struct Inner {
    pieces: VecDeque<Vec<u8>>,
    queued: usize,
    /// The writer wrote its last byte.
    finished: bool,
    /// The writer failed, or the reader went away.
    failed: Option<String>,
}

/// One writer, one reader.
#[derive(Default)]
pub(crate) struct ByteQueue {
    inner: Mutex<Inner>,
    changed: Condvar,
}

/// What one [`ByteQueue::take`] got.
pub(crate) enum Taken {
    /// Bytes, possibly none yet.
    Bytes(Vec<u8>),
    /// Everything was taken and the writer finished.
    End,
}

impl ByteQueue {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer wrote everything.
    pub(crate) fn finish(&self) {
        self.lock().finished = true;
        self.changed.notify_all();
    }

    /// Ends the queue with `why` for both sides: a writer's next write and
    /// a reader's next take fail.
    pub(crate) fn fail(&self, why: String) {
        let mut inner = self.lock();
        inner.failed.get_or_insert(why);
        inner.pieces.clear();
        inner.queued = 0;
        drop(inner);
        self.changed.notify_all();
    }

    /// Up to `limit` bytes, waiting at most `wait` for the first one.
    pub(crate) fn take(&self, limit: usize, wait: Duration) -> Result<Taken, String> {
        let inner = self.lock();
        let (mut inner, _) = self
            .changed
            .wait_timeout_while(inner, wait, |i| {
                i.queued == 0 && !i.finished && i.failed.is_none()
            })
            .unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &inner.failed {
            return Err(why.clone());
        }
        if inner.queued == 0 && inner.finished {
            return Ok(Taken::End);
        }
        let mut out = Vec::with_capacity(limit.min(inner.queued));
        while out.len() < limit {
            let Some(mut piece) = inner.pieces.pop_front() else {
                break;
            };
            let room = limit - out.len();
            if piece.len() > room {
                let rest = piece.split_off(room);
                inner.pieces.push_front(rest);
            }
            out.extend_from_slice(&piece);
        }
        inner.queued -= out.len();
        drop(inner);
        self.changed.notify_all();
        Ok(Taken::Bytes(out))
    }

    /// Bytes written and not yet taken.
    pub(crate) fn queued(&self) -> u64 {
        self.lock().queued as u64
    }
}

/// The writing end.
pub(crate) struct QueueWriter(pub Arc<ByteQueue>);

impl Write for QueueWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let queue = &self.0;
        let inner = queue.lock();
        let mut inner = queue
            .changed
            .wait_while(inner, |i| i.queued >= CAPACITY && i.failed.is_none())
            .unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &inner.failed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, why.clone()));
        }
        inner.pieces.push_back(buf.to_vec());
        inner.queued += buf.len();
        drop(inner);
        queue.changed.notify_all();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(taken: Taken) -> Vec<u8> {
        match taken {
            Taken::Bytes(b) => b,
            Taken::End => panic!("the queue ended early"),
        }
    }

    #[test]
    fn take_splits_pieces_and_ends_after_the_last_byte() {
        let queue = Arc::new(ByteQueue::default());
        let mut writer = QueueWriter(queue.clone());
        writer.write_all(b"hello ").unwrap();
        writer.write_all(b"world").unwrap();
        queue.finish();
        let short = Duration::from_millis(1);
        assert_eq!(bytes(queue.take(4, short).unwrap()), b"hell");
        assert_eq!(queue.queued(), 7);
        assert_eq!(bytes(queue.take(100, short).unwrap()), b"o world");
        assert!(matches!(queue.take(100, short).unwrap(), Taken::End));
    }

    #[test]
    fn an_empty_queue_answers_no_bytes_after_the_wait() {
        let queue = ByteQueue::default();
        let got = bytes(queue.take(10, Duration::from_millis(5)).unwrap());
        assert!(got.is_empty());
    }

    #[test]
    fn a_failed_queue_fails_its_writer_and_its_reader() {
        let queue = Arc::new(ByteQueue::default());
        queue.fail("cancelled".into());
        let err = QueueWriter(queue.clone()).write(b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(
            queue.take(1, Duration::ZERO).err().as_deref(),
            Some("cancelled")
        );
    }

    #[test]
    fn a_full_queue_holds_its_writer_until_taken() {
        let queue = Arc::new(ByteQueue::default());
        let writer = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let mut w = QueueWriter(queue);
                w.write_all(&vec![1u8; CAPACITY]).unwrap();
                w.write_all(&[2u8; 10]).unwrap();
            })
        };
        let mut got = 0;
        while got < CAPACITY + 10 {
            got += bytes(queue.take(1 << 20, Duration::from_secs(5)).unwrap()).len();
            assert!(queue.queued() as usize <= CAPACITY);
        }
        writer.join().unwrap();
    }
}
