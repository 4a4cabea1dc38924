//! Two OpenCL devices on one host for the figures that move a vGPU between
//! devices: PoCL offers its `basic` (one thread) and `pthread` (all cores)
//! CPU drivers as two devices when `POCL_DEVICES` names both. They differ
//! enough to be real different devices to the backend (own contexts, own
//! program builds), and every machine with PoCL has them.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

pub const POCL_DEVICES: &str = "basic pthread";

/// One device as `vgpu-backend --list-devices` names it.
#[derive(Debug, Clone)]
pub struct Device {
    /// `opencl:<platform>:<device>`, for `--device` and `vgpu-ctl rehome`.
    pub spec: String,
    /// The driver's full device name, e.g. `pthread-skylake-avx512-...`.
    pub name: String,
}

impl Device {
    /// The PoCL driver (`basic`, `pthread`): the name's first word.
    pub fn short(&self) -> &str {
        self.name.split('-').next().unwrap_or(&self.name)
    }
}

/// The source and destination of a move.
#[derive(Debug, Clone)]
pub struct Pair {
    pub from: Device,
    pub to: Device,
}

impl Pair {
    /// PoCL's `basic` → `pthread`, or why this host does not offer both.
    pub fn find(backend: &Path) -> Result<Pair, String> {
        let output = Command::new(backend)
            .arg("--list-devices")
            .envs(env())
            .output()
            .map_err(|e| format!("cannot run {} --list-devices: {e}", backend.display()))?;
        let devices = parse(&String::from_utf8_lossy(&output.stdout));
        let find = |driver: &str| {
            devices
                .iter()
                .find(|d| d.short() == driver)
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "PoCL offers no `{driver}` device with POCL_DEVICES=\"{POCL_DEVICES}\" \
                         (vgpu-backend --list-devices: {})",
                        devices
                            .iter()
                            .map(|d| d.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        };
        Ok(Pair {
            from: find("basic")?,
            to: find("pthread")?,
        })
    }

    /// `basic-… → pthread-…`, for the records' device field.
    pub fn describe(&self) -> String {
        format!("{} → {}", self.from.name, self.to.name)
    }

    pub fn reversed(&self) -> Pair {
        Pair {
            from: self.to.clone(),
            to: self.from.clone(),
        }
    }
}

/// The environment every backend of a move needs.
pub fn env() -> Vec<(OsString, OsString)> {
    vec![("POCL_DEVICES".into(), POCL_DEVICES.into())]
}

fn parse(list: &str) -> Vec<Device> {
    list.lines()
        .filter_map(|l| {
            let (spec, name) = l.split_once('\t')?;
            Some(Device {
                spec: spec.trim().to_string(),
                name: name.trim().to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_read_from_the_list() {
        let list =
            "opencl:0:0\tbasic-skylake-avx512-Xeon\nopencl:0:1\tpthread-skylake-avx512-Xeon\n";
        let devices = parse(list);
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[1].spec, "opencl:0:1");
        assert_eq!(devices[1].short(), "pthread");
    }
}
