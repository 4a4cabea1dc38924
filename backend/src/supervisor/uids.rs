//! The uids of `--worker-uids`: one per live worker, handed out by the
//! supervisor and reused only once nothing runs under them any more.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::sync::Mutex;

pub struct UidPool {
    range: RangeInclusive<u32>,
    in_use: Mutex<BTreeSet<u32>>,
}

impl UidPool {
    pub fn new(range: RangeInclusive<u32>) -> UidPool {
        UidPool {
            range,
            in_use: Mutex::new(BTreeSet::new()),
        }
    }

    /// A uid no worker holds and no process runs as. A process left under
    /// a free uid (a worker's child that outlived it: a guest's CPU
    /// kernel is native code and may fork) is killed and its uid skipped
    /// this time, so a new VM's worker never shares a uid with what an
    /// earlier VM left behind.
    pub fn take(&self) -> std::io::Result<u32> {
        let mut in_use = self.in_use.lock().unwrap_or_else(|e| e.into_inner());
        let running = processes_by_uid();
        for uid in self.range.clone() {
            if in_use.contains(&uid) {
                continue;
            }
            let left: Vec<_> = running
                .iter()
                .filter(|(_, owner)| *owner == uid)
                .map(|(pid, _)| *pid)
                .collect();
            if left.is_empty() {
                in_use.insert(uid);
                return Ok(uid);
            }
            for pid in left {
                log::warn!(
                    "process {pid} still runs as worker uid {uid} after its worker ended: killed"
                );
                // SAFETY: a plain signal; the pid was read from /proc just
                // now and runs as a uid reserved for workers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            format!(
                "every uid of --worker-uids {}-{} is taken ({} workers); the next front-end waits for a worker to end",
                self.range.start(),
                self.range.end(),
                in_use.len()
            ),
        ))
    }

    pub fn give_back(&self, uid: u32) {
        self.in_use
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&uid);
    }
}

/// Every process's (pid, real uid), from /proc.
fn processes_by_uid() -> Vec<(libc::pid_t, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: libc::pid_t = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let uid = status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some((pid, uid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_handed_out_once_and_come_back() {
        // A range no process of this machine runs as.
        let pool = UidPool::new(3_999_000_000..=3_999_000_001);
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert_ne!(a, b);
        let err = pool.take().expect_err("the range is used up");
        assert!(err.to_string().contains("3999000000-3999000001"), "{err}");
        pool.give_back(a);
        assert_eq!(pool.take().unwrap(), a);
    }

    #[test]
    fn this_process_is_listed_under_its_uid() {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let pid = std::process::id() as libc::pid_t;
        assert!(processes_by_uid().contains(&(pid, uid)));
    }
}
