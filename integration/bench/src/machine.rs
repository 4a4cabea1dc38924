//! The machine a run was made on.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `model name` of /proc/cpuinfo.
    pub cpu: String,
    /// Logical CPUs online.
    pub cores: usize,
    /// `uname -sr`.
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Machine {
            cpu: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown CPU".into()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: kernel(),
        }
    }
}

fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_string())
    })
}

fn kernel() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
    match (
        read("/proc/sys/kernel/ostype"),
        read("/proc/sys/kernel/osrelease"),
    ) {
        (Ok(os), Ok(release)) => format!("{os} {release}"),
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_is_taken_from_the_first_model_name_line() {
        let info = "processor\t: 0\nmodel name\t: Test CPU @ 1 GHz\nmodel name\t: other\n";
        assert_eq!(cpu_model(info).as_deref(), Some("Test CPU @ 1 GHz"));
        assert_eq!(cpu_model("flags: x"), None);
    }
}
