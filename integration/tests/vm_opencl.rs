//! A real Linux guest in the patched QEMU runs clinfo and the OpenCL C suite
//! through /dev/vgpu0 on the host's device; results must equal a native run.

use std::path::PathBuf;
use std::process::Command;

use vgpu_integration::backend::Backend;
use vgpu_integration::paths;
use vgpu_integration::suite::parse_results;
use vgpu_integration::vm::{boot, VmConfig};

/// The patched QEMU and the guest image, or why the test cannot run.
fn vm_parts() -> Option<(PathBuf, PathBuf)> {
    if std::env::var("VGPU_SKIP_VM").is_ok_and(|v| v == "1") {
        eprintln!("skipped: VGPU_SKIP_VM=1");
        return None;
    }
    let qemu =
        paths::qemu().expect("no patched QEMU recorded in target/qemu-path: run scripts/setup.sh");
    let image =
        paths::guest_image().expect("no guest image in target/guest-image: run scripts/setup.sh");
    Some((qemu, image))
}

const SUITE: &[&str] = &[
    "vector_add",
    "reduction_local",
    "api_coverage",
    "bad_args",
    "matmul",
    "nbody",
    "transpose",
    "smith_waterman",
];

fn native_results() -> String {
    let mut out = String::new();
    for prog in SUITE {
        let output = Command::new(paths::cl_tests_dir().join(prog))
            .env("CLTEST_QUICK", "1")
            .output()
            .unwrap_or_else(|e| panic!("run native {prog}: {e}"));
        out.push_str(&String::from_utf8_lossy(&output.stdout));
    }
    out
}

#[test]
fn guest_runs_clinfo_and_the_opencl_suite_on_the_host_device() {
    let Some((qemu, image)) = vm_parts() else {
        return;
    };
    let dir = paths::scratch("vm-suite");
    let backend = Backend::start(&dir, &[]);
    let mut config = VmConfig::new(&qemu, &image, "/opt/vgpu/bin/vgpu-guest-suite");
    config.vgpu_socket = Some(backend.socket.clone());
    let run = boot(&config, &dir);
    println!(
        "guest ran the suite in {:.1} s under {}",
        run.elapsed.as_secs_f32(),
        run.accel
    );
    if run.exit_status != Some(0) {
        println!("backend log:\n{}", backend.log());
    }
    run.assert_success();
    assert!(
        run.console.contains("vgpu: "),
        "clinfo did not list the vgpu device:\n{}",
        run.console
    );

    let guest = parse_results(&run.console);
    let native = parse_results(&native_results());
    for prog in SUITE {
        let (g, n) = (&guest[*prog], &native[*prog]);
        assert!(g.1, "{prog} failed in the guest:\n{}", run.console);
        if *prog != "api_coverage" && *prog != "bad_args" {
            assert_eq!(
                g.0, n.0,
                "{prog}: guest checksum differs from the native run"
            );
        }
    }
}

#[test]
fn guest_ioctl_bad_input_gets_errors_and_the_device_answers() {
    let Some((qemu, image)) = vm_parts() else {
        return;
    };
    let dir = paths::scratch("vm-ioctl");
    let mut backend = Backend::start(&dir, &[]);
    let mut config = VmConfig::new(&qemu, &image, "/opt/vgpu/bin/vgpu-ioctl-test");
    config.vgpu_socket = Some(backend.socket.clone());
    let run = boot(&config, &dir);
    run.assert_success();
    assert!(!run.console.contains("FAIL"), "{}", run.console);
    assert!(backend.is_running(), "backend died:\n{}", backend.log());
}
