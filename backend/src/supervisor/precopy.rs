//! The pre-copy socket (`--precopy-socket`): each connection is a QEMU's
//! pre-copy channel, passed to the worker serving that QEMU. Which worker
//! that is comes from the connection's credentials (`SO_PEERCRED`): the
//! pid that connected here is the pid its worker saw on the vhost-user
//! socket. The supervisor reads nothing on it.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;

use crate::supervisor::{Supervisor, WorkerLink};

pub fn spawn(listener: UnixListener, supervisor: Arc<Supervisor>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("precopy".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                hand_over(stream, &supervisor);
            }
        })?;
    Ok(())
}

fn hand_over(stream: UnixStream, supervisor: &Supervisor) {
    let pid = crate::peer::peer_pid(stream.as_raw_fd()).map(|p| p as u32);
    let Some(link) = worker_of(pid, &supervisor.serving(None)) else {
        log::warn!(
            "pre-copy connection from pid {}: no worker serves that front-end; closed",
            pid.map_or("unknown".into(), |p| p.to_string())
        );
        return;
    };
    match link.pass_precopy(stream) {
        Ok(()) => log::info!(
            "pre-copy channel of front-end {} passed to worker {}",
            link.vm_id,
            link.pid
        ),
        Err(e) => log::warn!(
            "cannot pass a pre-copy connection to worker {}: {e}",
            link.pid
        ),
    }
}

/// The worker whose front-end is `pid`.
fn worker_of(pid: Option<u32>, serving: &[Arc<WorkerLink>]) -> Option<Arc<WorkerLink>> {
    let pid = pid?;
    serving
        .iter()
        .find(|link| *link.front_end.lock().unwrap_or_else(|e| e.into_inner()) == Some(pid))
        .cloned()
}
