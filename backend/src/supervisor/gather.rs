//! `status` and `metrics` across the workers: each answers for its own VM
//! and device counters; the supervisor adds them up, with the counters of
//! workers that already ended.

use std::sync::Arc;

use crate::control_schema::{DeviceFigures, MetricsReply, ObjectCounts, StatusReply};
use crate::supervisor::{Supervisor, WorkerLink};

/// Asks every serving worker, in parallel (a busy one must not hold up
/// the others), and keeps the answers that came.
fn ask_all<T: for<'de> serde::Deserialize<'de> + Send + 'static>(
    supervisor: &Supervisor,
    command: &'static str,
) -> Vec<(Arc<WorkerLink>, T)> {
    let asked: Vec<_> = supervisor
        .serving(None)
        .into_iter()
        .map(|link| {
            let asking = link.clone();
            let answer = std::thread::spawn(move || {
                let line = asking.request(&[command], None, &mut |_| {})?;
                serde_json::from_str::<T>(&line).map_err(|e| {
                    crate::control_schema::ErrorReply::new(
                        crate::control_schema::ErrorCode::WorkerGone,
                        format!("malformed {command} reply: {e}"),
                    )
                })
            });
            (link, answer)
        })
        .collect();
    asked
        .into_iter()
        .filter_map(|(link, answer)| match answer.join() {
            Ok(Ok(value)) => Some((link, value)),
            Ok(Err(e)) => {
                log::debug!("{command} of worker {}: {e}", link.pid);
                None
            }
            Err(_) => None,
        })
        .collect()
}

/// The `status` reply: every connected front-end, in connection order.
pub fn status(supervisor: &Supervisor) -> StatusReply {
    let mut vms: Vec<_> = ask_all::<StatusReply>(supervisor, "status")
        .into_iter()
        .flat_map(|(_, reply)| reply.vms)
        .collect();
    vms.sort_by_key(|v| v.id);
    let devices = supervisor.devices();
    StatusReply {
        device: devices.join("; "),
        devices,
        sessions: vms.iter().map(|v| v.sessions).sum(),
        objects: vms
            .iter()
            .fold(ObjectCounts::default(), |sum, v| sum.add(&v.objects)),
        vms,
    }
}

/// The `metrics` reply: every live VM's counters, and per device the
/// counters of every worker that ever served on it.
pub fn metrics(supervisor: &Supervisor) -> MetricsReply {
    let replies = ask_all::<MetricsReply>(supervisor, "metrics");
    let mut vms: Vec<_> = replies.iter().flat_map(|(_, r)| r.vms.clone()).collect();
    vms.sort_by_key(|v| v.id);
    let live = replies.into_iter().flat_map(|(_, r)| r.devices);
    let mut devices = sum_devices(supervisor.retired().into_iter().chain(live));
    let memory_used = vms.iter().map(|v| v.memory_used_bytes).sum();
    for device in &mut devices {
        device.memory_used_bytes = memory_used;
    }
    MetricsReply { vms, devices }
}

/// Counters added up per API; the device named is the newest one given.
pub fn sum_devices(figures: impl IntoIterator<Item = DeviceFigures>) -> Vec<DeviceFigures> {
    let mut sums: Vec<DeviceFigures> = Vec::new();
    for f in figures {
        match sums.iter_mut().find(|s| s.api == f.api) {
            Some(s) => {
                s.device = f.device;
                s.calls += f.calls;
                s.errors += f.errors;
                s.kernels_launched += f.kernels_launched;
                s.bytes_from_guest += f.bytes_from_guest;
                s.bytes_to_guest += f.bytes_to_guest;
            }
            None => sums.push(DeviceFigures {
                memory_used_bytes: 0,
                ..f
            }),
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(api: &str, device: &str, calls: u64) -> DeviceFigures {
        DeviceFigures {
            api: api.into(),
            device: device.into(),
            calls,
            errors: 1,
            kernels_launched: 2,
            bytes_from_guest: 3,
            bytes_to_guest: 4,
            memory_used_bytes: 99,
        }
    }

    #[test]
    fn device_counters_add_up_per_api() {
        let sums = sum_devices([
            figures("opencl", "old", 10),
            figures("cuda", "gpu", 5),
            figures("opencl", "new", 7),
        ]);
        assert_eq!(sums.len(), 2);
        assert_eq!(sums[0].api, "opencl");
        assert_eq!(sums[0].device, "new");
        assert_eq!(sums[0].calls, 17);
        assert_eq!(sums[0].errors, 2);
        assert_eq!(sums[0].bytes_to_guest, 8);
        assert_eq!(sums[0].memory_used_bytes, 0);
        assert_eq!(sums[1].calls, 5);
    }
}
