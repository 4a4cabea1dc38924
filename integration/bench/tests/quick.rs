//! Runs the harness end to end in quick mode and checks its JSON: every
//! record parses and has a vgpu figure, and a native one wherever there is
//! a native counterpart. Timings are never judged here.

use std::path::{Path, PathBuf};
use std::process::Command;

use vgpu_bench::record::read_json;
use vgpu_bench::report::included;
use vgpu_bench::report::state_tables::lays_out;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `VGPU_BENCH_BIN_DIR`, else target/release, else target/debug: the first
/// holding both vgpu-backend and libvgpu_opencl.so.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VGPU_BENCH_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let built = |d: &Path| d.join("vgpu-backend").exists() && d.join("libvgpu_opencl.so").exists();
    ["target/release", "target/debug"]
        .iter()
        .map(|d| root().join(d))
        .find(|d| built(d))
        .expect("no vgpu-backend and libvgpu_opencl.so under target/: run scripts/setup.sh (or cargo build --workspace)")
}

#[test]
fn quick_run_writes_a_complete_record_for_every_figure() {
    let out = std::env::temp_dir().join(format!("vgpu-bench-quick-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = Command::new(env!("CARGO_BIN_EXE_vgpu-bench"))
        .arg("--quick")
        .arg("--out")
        .arg(&out)
        .arg("--root")
        .arg(root())
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .expect("run vgpu-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "vgpu-bench --quick failed:\n{stdout}\n{stderr}"
    );

    let records = read_json(&out.join("bench.json")).expect("bench.json parses");
    assert!(!records.is_empty(), "no records:\n{stderr}");
    for r in &records {
        // Checkpoint, re-home and migration have no native counterpart.
        let native_expected = !lays_out(&r.benchmark);
        assert_eq!(
            r.native.is_some(),
            native_expected,
            "{} {:?}: native figure {}expected",
            r.benchmark,
            r.parameters,
            if native_expected { "" } else { "not " }
        );
        assert_eq!(r.ratio.is_some(), native_expected, "{}: ratio", r.benchmark);
        if let Some(native) = r.native {
            assert!(
                native.runs >= 1 && native.median.is_finite(),
                "{} {:?}: no native runs",
                r.benchmark,
                r.parameters
            );
        }
        assert!(
            r.vgpu.runs >= 1 && r.vgpu.median.is_finite(),
            "{} {:?}: no vgpu runs",
            r.benchmark,
            r.parameters
        );
        assert!(!r.unit.is_empty() && !r.device.is_empty() && !r.machine.cpu.is_empty());
    }
    for kind in [
        "roundtrip_finish",
        "roundtrip_program_info",
        "roundtrip_program_info_idle",
        "enqueue_rate",
        "bandwidth_read",
        "bandwidth_write",
        "workload_time",
        "queue_depth_drain",
        "checkpoint_time",
        "restore_time",
        "rehome_pause",
    ] {
        assert!(
            records.iter().any(|r| r.benchmark == kind),
            "no {kind} record"
        );
    }
    let report = std::fs::read_to_string(out.join("BENCHMARKS.md")).expect("report written");
    assert!(report.contains("## Targets"));
    // Every part kept by hand is copied in, whatever the run measured
    // (a note about another run excepted).
    for source in included::SOURCES {
        let text = std::fs::read_to_string(root().join(source.path)).expect("included file");
        if text.starts_with("<!-- vgpu-bench: only for the run of commit ") {
            continue;
        }
        let first_line = text.lines().next().expect("a non-empty file");
        assert!(
            report.contains(&format!("[`{}`]", source.path)) && report.contains(first_line),
            "{} not in the report:\n{report}",
            source.path
        );
    }
    // Migration needs the patched QEMU and the guest image: measured, or
    // said why not.
    let migrated = records
        .iter()
        .any(|r| r.benchmark == "migration_total_time");
    assert!(
        migrated || report.contains("`migration`: not measured in this run — "),
        "neither migration figures nor a reason in the report:\n{report}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
