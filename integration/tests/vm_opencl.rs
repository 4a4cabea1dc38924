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
    "images",
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
    // The WAIT busy-poll's round trips, off and on (vgpu-ioctl-test.c).
    for line in run.console.lines().filter(|l| l.contains("INFO ")) {
        println!("guest (TCG): {}", line.trim());
    }
}

/// 64 MiB and 256 MiB transfers from buffers on scattered 4 KiB pages: the
/// guest library cuts them to fit the device's 4096 descriptors per chain
/// (a 32 MiB chunk used to fail with E2BIG, seen by the program as
/// CL_DEVICE_NOT_AVAILABLE).
#[test]
fn guest_moves_64_and_256_mib_from_scattered_pages() {
    let Some((qemu, image)) = vm_parts() else {
        return;
    };
    let dir = paths::scratch("vm-big-transfer");
    let backend = Backend::start(&dir, &[]);
    let mut config = VmConfig::new(&qemu, &image, "/opt/vgpu/bin/big_transfer,-m,64,-m,256");
    config.vgpu_socket = Some(backend.socket.clone());
    let run = boot(&config, &dir);
    if run.exit_status != Some(0) {
        println!("backend log:\n{}", backend.log());
    }
    run.assert_success();
    let guest = parse_results(&run.console);
    let native = Command::new(paths::cl_tests_dir().join("big_transfer"))
        .args(["-m", "64", "-m", "256"])
        .output()
        .expect("run big_transfer natively");
    let native = parse_results(&String::from_utf8_lossy(&native.stdout));
    let (g, n) = (&guest["big_transfer"], &native["big_transfer"]);
    assert!(g.1, "big_transfer failed in the guest:\n{}", run.console);
    assert_eq!(g.0, n.0, "guest checksum differs from the native run");
    for line in run.console.lines().filter(|l| l.contains("MB/s")) {
        println!("guest (TCG): {line}");
    }
}
