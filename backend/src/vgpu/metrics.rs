//! Counters of what each VM and device did, kept where the calls run (the
//! batch loop counts each message in plain integers and publishes the batch
//! with a few relaxed atomic adds, no lock), and their Prometheus text
//! exposition for `--metrics`. `vgpu-ctl top` reads the same figures
//! through the control socket's `metrics` command.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use vgpu_protocol::opcode;

use crate::control_schema::{MetricsReply, Timing};

/// Calls, errors, kernel launches and bulk bytes of one VM or one device.
#[derive(Debug, Default)]
pub struct CallCounters {
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub kernels: AtomicU64,
    pub bytes_from_guest: AtomicU64,
    pub bytes_to_guest: AtomicU64,
}

impl CallCounters {
    fn add(&self, counter: &AtomicU64, n: u64) {
        if n != 0 {
            counter.fetch_add(n, Relaxed);
        }
    }

    fn note(&self, calls: u64, errors: u64, kernels: u64, from_guest: u64, to_guest: u64) {
        self.add(&self.calls, calls);
        self.add(&self.errors, errors);
        self.add(&self.kernels, kernels);
        self.add(&self.bytes_from_guest, from_guest);
        self.add(&self.bytes_to_guest, to_guest);
    }
}

/// One batch's figures, counted in plain integers while it runs.
#[derive(Debug, Default)]
pub struct BatchCounts {
    /// Per API (index of [`APIS`]), then session messages.
    calls: [u64; 3],
    errors: [u64; 3],
    kernels: [u64; 3],
    pub from_guest: u64,
    pub to_guest: u64,
}

impl BatchCounts {
    /// One message has run: `ok` if it answered success.
    #[inline]
    pub fn note_call(&mut self, op: u32, ok: bool) {
        let slot = api_of(op).unwrap_or(2);
        self.calls[slot] += 1;
        if !ok {
            self.errors[slot] += 1;
        } else if op == opcode::EnqueueNdRange || op == opcode::CuLaunchKernel {
            self.kernels[slot] += 1;
        }
    }

    /// A call counted as a success (`note_call`) failed after all, on a
    /// thread its executor handed it to.
    pub fn note_late_failure(&mut self, op: u32) {
        let slot = api_of(op).unwrap_or(2);
        self.errors[slot] += 1;
        if op == opcode::EnqueueNdRange || op == opcode::CuLaunchKernel {
            self.kernels[slot] = self.kernels[slot].saturating_sub(1);
        }
    }

    /// The API whose calls the batch's bulk data is counted under: the one
    /// with the most calls in the batch.
    fn bulk_api(&self) -> Option<usize> {
        (0..APIS.len())
            .filter(|&i| self.calls[i] > 0)
            .max_by_key(|&i| self.calls[i])
    }
}

/// The device APIs, in the order of [`DEVICES`].
pub const APIS: [&str; 2] = ["opencl", "cuda"];

/// Which API an opcode belongs to (none for session messages).
pub fn api_of(op: u32) -> Option<usize> {
    match op {
        0x1000..=0x1fff => Some(0),
        0x2000..=0x2fff => Some(1),
        _ => None,
    }
}

/// Per-device totals since the backend started (one device per API).
pub static DEVICES: [CallCounters; 2] = [
    CallCounters {
        calls: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        kernels: AtomicU64::new(0),
        bytes_from_guest: AtomicU64::new(0),
        bytes_to_guest: AtomicU64::new(0),
    },
    CallCounters {
        calls: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        kernels: AtomicU64::new(0),
        bytes_from_guest: AtomicU64::new(0),
        bytes_to_guest: AtomicU64::new(0),
    },
];

/// Count, total and last duration of an operation, in microseconds.
#[derive(Debug, Default)]
pub struct Durations {
    count: AtomicU64,
    total_us: AtomicU64,
    last_us: AtomicU64,
}

impl Durations {
    pub fn note(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.count.fetch_add(1, Relaxed);
        self.total_us.fetch_add(us, Relaxed);
        self.last_us.store(us, Relaxed);
    }

    pub fn figures(&self) -> Timing {
        Timing {
            count: self.count.load(Relaxed),
            seconds_total: self.total_us.load(Relaxed) as f64 / 1e6,
            last_seconds: self.last_us.load(Relaxed) as f64 / 1e6,
        }
    }
}

/// One VM's counters.
#[derive(Debug, Default)]
pub struct VmMetrics {
    pub calls: CallCounters,
    pub checkpoints: Durations,
    pub restores: Durations,
    pub migrations_out: Durations,
    pub migrations_in: Durations,
    pub rehomes: Durations,
}

impl VmMetrics {
    /// Publishes a batch's figures to this VM's and the devices' counters.
    pub fn note_batch(&self, b: &BatchCounts) {
        let sum = |v: &[u64; 3]| v.iter().sum::<u64>();
        self.calls.note(
            sum(&b.calls),
            sum(&b.errors),
            sum(&b.kernels),
            b.from_guest,
            b.to_guest,
        );
        let bulk = b.bulk_api();
        for (api, device) in DEVICES.iter().enumerate() {
            let (from, to) = if bulk == Some(api) {
                (b.from_guest, b.to_guest)
            } else {
                (0, 0)
            };
            device.note(b.calls[api], b.errors[api], b.kernels[api], from, to);
        }
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// The figures in the Prometheus text exposition format (version 0.0.4).
pub fn prometheus(figures: &MetricsReply) -> String {
    let mut out = String::new();
    fn family(
        out: &mut String,
        name: &str,
        kind: &str,
        help: &str,
        samples: Vec<(String, String)>,
    ) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
    let vm = |id: u64| format!("vm=\"{id}\"");
    let per_vm = |f: &dyn Fn(&crate::control_schema::VmFigures) -> String| {
        figures
            .vms
            .iter()
            .map(|v| (vm(v.id), f(v)))
            .collect::<Vec<_>>()
    };
    family(
        &mut out,
        "vgpu_calls_total",
        "counter",
        "Messages (API calls) a VM's guests sent that ran.",
        per_vm(&|v| v.calls.to_string()),
    );
    family(
        &mut out,
        "vgpu_call_errors_total",
        "counter",
        "Messages that answered an error status.",
        per_vm(&|v| v.errors.to_string()),
    );
    family(
        &mut out,
        "vgpu_kernels_launched_total",
        "counter",
        "Kernel launches that succeeded.",
        per_vm(&|v| v.kernels_launched.to_string()),
    );
    family(
        &mut out,
        "vgpu_guest_read_bytes_total",
        "counter",
        "Bulk data the device read from guest memory.",
        per_vm(&|v| v.bytes_from_guest.to_string()),
    );
    family(
        &mut out,
        "vgpu_guest_written_bytes_total",
        "counter",
        "Bulk data the device wrote into guest memory.",
        per_vm(&|v| v.bytes_to_guest.to_string()),
    );
    family(
        &mut out,
        "vgpu_memory_used_bytes",
        "gauge",
        "Device memory a VM's objects hold.",
        per_vm(&|v| v.memory_used_bytes.to_string()),
    );
    family(
        &mut out,
        "vgpu_memory_limit_bytes",
        "gauge",
        "Device memory a VM may hold (0: no limit).",
        per_vm(&|v| v.memory_limit_bytes.to_string()),
    );
    family(
        &mut out,
        "vgpu_sessions",
        "gauge",
        "Guest processes with a session open.",
        per_vm(&|v| v.sessions.to_string()),
    );
    family(
        &mut out,
        "vgpu_paused",
        "gauge",
        "1 while the VM's vGPU is paused.",
        per_vm(&|v| u8::from(v.paused).to_string()),
    );
    let objects = figures
        .vms
        .iter()
        .flat_map(|v| {
            v.objects
                .pairs()
                .into_iter()
                .map(move |(kind, n)| (format!("vm=\"{}\",kind=\"{kind}\"", v.id), n.to_string()))
        })
        .collect();
    family(
        &mut out,
        "vgpu_objects",
        "gauge",
        "Live objects by kind.",
        objects,
    );
    type Pick = fn(&crate::control_schema::VmFigures) -> &Timing;
    let timings: [(&str, &str, Pick); 5] = [
        (
            "checkpoint",
            "Checkpoints written by vgpu-ctl checkpoint.",
            |v| &v.checkpoints,
        ),
        ("restore", "Restores from a checkpoint.", |v| &v.restores),
        (
            "migration_save",
            "Live migrations out (device state sent).",
            |v| &v.migrations_out,
        ),
        (
            "migration_load",
            "Live migrations in (device state received).",
            |v| &v.migrations_in,
        ),
        ("rehome", "Re-homes to another device.", |v| &v.rehomes),
    ];
    for (what, help, pick) in timings {
        let name = format!("vgpu_{what}_duration_seconds");
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} summary");
        for v in &figures.vms {
            let t = pick(v);
            let _ = writeln!(out, "{name}_sum{{{}}} {}", vm(v.id), t.seconds_total);
            let _ = writeln!(out, "{name}_count{{{}}} {}", vm(v.id), t.count);
        }
    }
    let device = |d: &crate::control_schema::DeviceFigures| {
        format!("api=\"{}\",device=\"{}\"", d.api, escape(&d.device))
    };
    let per_device = |f: &dyn Fn(&crate::control_schema::DeviceFigures) -> u64| {
        figures
            .devices
            .iter()
            .map(|d| (device(d), f(d).to_string()))
            .collect::<Vec<_>>()
    };
    family(
        &mut out,
        "vgpu_device_calls_total",
        "counter",
        "Calls a device ran, over every VM since the backend started.",
        per_device(&|d| d.calls),
    );
    family(
        &mut out,
        "vgpu_device_call_errors_total",
        "counter",
        "Calls a device answered with an error.",
        per_device(&|d| d.errors),
    );
    family(
        &mut out,
        "vgpu_device_kernels_launched_total",
        "counter",
        "Kernel launches a device ran.",
        per_device(&|d| d.kernels_launched),
    );
    family(
        &mut out,
        "vgpu_device_guest_read_bytes_total",
        "counter",
        "Bulk data read from guest memory for a device.",
        per_device(&|d| d.bytes_from_guest),
    );
    family(
        &mut out,
        "vgpu_device_guest_written_bytes_total",
        "counter",
        "Bulk data a device wrote into guest memory.",
        per_device(&|d| d.bytes_to_guest),
    );
    family(
        &mut out,
        "vgpu_device_memory_used_bytes",
        "gauge",
        "Device memory the connected VMs hold.",
        per_device(&|d| d.memory_used_bytes),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control_schema::{DeviceFigures, ObjectCounts, VmFigures};

    #[test]
    fn kernel_launches_count_only_when_they_succeed() {
        let m = VmMetrics::default();
        let mut b = BatchCounts::default();
        b.note_call(opcode::EnqueueNdRange, true);
        b.note_call(opcode::EnqueueNdRange, false);
        b.note_call(opcode::CuLaunchKernel, true);
        b.note_call(opcode::Ping, true);
        b.from_guest = 64;
        m.note_batch(&b);
        assert_eq!(m.calls.calls.load(Relaxed), 4);
        assert_eq!(m.calls.errors.load(Relaxed), 1);
        assert_eq!(m.calls.kernels.load(Relaxed), 2);
        assert_eq!(m.calls.bytes_from_guest.load(Relaxed), 64);
        assert_eq!(b.bulk_api(), Some(0), "two OpenCL calls, one CUDA");
    }

    #[test]
    fn exposition_has_one_sample_per_vm_and_escapes_labels() {
        let vm = VmFigures {
            id: 7,
            sessions: 1,
            paused: false,
            calls: 12,
            errors: 1,
            kernels_launched: 3,
            bytes_from_guest: 4096,
            bytes_to_guest: 8,
            memory_used_bytes: 100,
            memory_limit_bytes: 200,
            objects: ObjectCounts {
                buffers: 2,
                ..Default::default()
            },
            checkpoints: Timing {
                count: 1,
                seconds_total: 0.25,
                last_seconds: 0.25,
            },
            restores: Timing::default(),
            migrations_out: Timing::default(),
            migrations_in: Timing::default(),
            rehomes: Timing::default(),
        };
        let text = prometheus(&MetricsReply {
            vms: vec![vm],
            devices: vec![DeviceFigures {
                api: "opencl".into(),
                device: "a \"quoted\"\nname".into(),
                calls: 12,
                errors: 1,
                kernels_launched: 3,
                bytes_from_guest: 4096,
                bytes_to_guest: 8,
                memory_used_bytes: 100,
            }],
        });
        for line in [
            "vgpu_kernels_launched_total{vm=\"7\"} 3",
            "vgpu_calls_total{vm=\"7\"} 12",
            "vgpu_objects{vm=\"7\",kind=\"buffers\"} 2",
            "vgpu_checkpoint_duration_seconds_sum{vm=\"7\"} 0.25",
            "vgpu_checkpoint_duration_seconds_count{vm=\"7\"} 1",
            r#"vgpu_device_calls_total{api="opencl",device="a \"quoted\"\nname"} 12"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }
}
