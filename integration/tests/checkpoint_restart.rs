//! An unmodified OpenCL program (the C suite's checkpoint_loop) runs through
//! the ICD; mid-run the backend writes a checkpoint and exits; a new backend
//! starts from the checkpoint on the same socket; the program reconnects,
//! resumes its session and finishes with the result of an undisturbed run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vgpu_integration::backend::Backend;
use vgpu_integration::paths;
use vgpu_integration::suite::parse_results;

fn icd_vendors(dir: &std::path::Path) -> std::path::PathBuf {
    let icd = dir.join("vgpu.icd");
    std::fs::write(&icd, format!("{}\n", paths::icd_library().display())).expect("write vgpu.icd");
    icd
}

fn ctl(backend: &Backend, args: &[&str]) -> String {
    let out = Command::new(paths::target_dir().join("vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .arg("--json")
        .args(args)
        .output()
        .expect("run vgpu-ctl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "vgpu-ctl {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn program_survives_a_backend_restart_from_a_checkpoint() {
    let program = paths::cl_tests_dir().join("checkpoint_loop");
    assert!(
        program.exists(),
        "{} is missing: build the C suite first (scripts/setup.sh)",
        program.display()
    );
    let args = ["-m", "16", "-i", "60", "-p", "2"];
    let native = Command::new(&program)
        .args(args)
        .output()
        .expect("native run");
    let native = parse_results(&String::from_utf8_lossy(&native.stdout));

    let dir = paths::scratch("ckpt-restart");
    let first = Backend::start(&dir, &[]);
    let mut child = Command::new(&program)
        .args(args)
        .env("OCL_ICD_VENDORS", icd_vendors(&dir))
        .env("VGPU_SOCKET", &first.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start checkpoint_loop through vgpu");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut output = String::new();
    // Let it run a while, then checkpoint and stop the backend.
    for line in lines.by_ref() {
        let line = line.expect("read");
        output.push_str(&line);
        output.push('\n');
        if line.starts_with("PROGRESS 10") {
            break;
        }
    }
    let checkpoint = dir.join("vgpu.ckpt");
    let report = ctl(
        &first,
        &["checkpoint", checkpoint.to_str().unwrap(), "--then", "exit"],
    );
    assert!(report.contains("buffer_bytes"), "{report}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut first = first;
    while first.is_running() {
        assert!(
            Instant::now() < deadline,
            "the backend did not exit after the checkpoint"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let second = Backend::start(&dir, &["--restore", checkpoint.to_str().unwrap()]);
    for line in lines {
        let line = line.expect("read");
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "program failed after the restart:\n{output}\nbackend:\n{}",
        second.log()
    );
    let resumed = parse_results(&output);
    assert_eq!(
        resumed["checkpoint_loop"], native["checkpoint_loop"],
        "result differs from the native run"
    );
    drop(first);
}
