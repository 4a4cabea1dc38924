//! The control socket `vgpu-ctl` talks to. One command per line: its words
//! separated by tabs, or a JSON array of strings (which can carry any path,
//! tabs and newlines included); long operations answer with `{"progress": ...}`
//! lines, and every command ends with one JSON line: its reply, or
//! `{"error": {"code": ..., "message": ...}}`. The replies are the types of
//! [`crate::control_schema`]; `backend/CONTROL.md` documents them.
//!
//! | command | words |
//! |---|---|
//! | `status` | |
//! | `metrics` | |
//! | `checkpoint` | FILE, VM id or `-`, then: `resume` / `pause` / `exit`, copy rounds while the guest runs (default 5; 0: stop-and-copy), optionally the BASE of an incremental checkpoint |
//! | `restore` | FILE, VM id or `-`, optionally the BASE an incremental FILE was taken against |
//! | `migration-base` | FILE, VM id or `-`: a whole checkpoint both hosts hold, which the next migration's device state refers to |
//! | `rehome` | device SPEC |
//! | `pause`, `resume` | VM id or `-` |
//! | `profile` | FILE, VM id or `-`: write the profile the VM's guests saw |
//! | `accepts` | FILE: whether this backend's device honours that profile |

//!
//! The supervisor answers here; each command on a VM runs in the worker
//! serving it (see `crate::supervisor`), with any file it names opened by
//! the supervisor and passed along.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::control_schema::{ErrorCode, ErrorReply, Line, RehomedReply, StatusReply};
use crate::startup::error_chain;
use crate::supervisor::{Supervisor, WorkerLink};

/// Binds the control socket: done before the vhost-user socket appears,
/// so whoever sees that one can already reach this one. Only the
/// supervisor's user may connect (mode 0600, whatever the umask): workers
/// run as another user, and Landlock does not keep a process from
/// connecting to a socket by path, so the mode is what keeps a VM's worker
/// from checkpointing, restoring or re-homing the others. Set before any
/// worker exists.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

pub fn spawn(listener: UnixListener, registry: Arc<Supervisor>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let registry = registry.clone();
                // Each connection on its own thread: a checkpoint must not
                // hold up a status query.
                let _ = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || {
                        if let Err(e) = serve(stream, &registry) {
                            log::debug!("control connection: {e}");
                        }
                    });
            }
        })?;
    Ok(())
}

fn serve(stream: UnixStream, registry: &Supervisor) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let writer = Arc::new(Mutex::new(stream));
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 {
        let text = line.trim_end_matches(['\n', '\r']);
        let owned: Result<Vec<String>, ErrorReply> = if text.starts_with('[') {
            serde_json::from_str(text).map_err(|e| {
                bad(format!(
                    "a command line that starts with [ must be a JSON array of strings: {e}"
                ))
            })
        } else {
            Ok(text.split('\t').map(str::to_string).collect())
        };
        let words: Vec<&str> = match &owned {
            Ok(words) => words.iter().map(String::as_str).collect(),
            Err(_) => Vec::new(),
        };
        let result = match &owned {
            Ok(_) => run(&words, registry, &writer),
            Err(e) => Err(e.clone()),
        };
        let answer = match &result {
            Ok(answer) => answer.clone(),
            Err(error) => to_line(&Line::Error {
                error: error.clone(),
            }),
        };
        writeln!(writer.lock().unwrap_or_else(|e| e.into_inner()), "{answer}")?;
        if words.first() == Some(&"checkpoint") && words.get(3) == Some(&"exit") && result.is_ok() {
            log::info!("checkpoint written; exiting as asked");
            registry.shut_down();
        }
        line.clear();
    }
    Ok(())
}

/// One line of JSON (serde_json escapes every newline inside strings).
fn to_line(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("control replies have string keys only")
}

fn bad(message: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::BadArgument, message)
}

fn file_error(message: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::File, message)
}

fn vm_id(word: Option<&&str>) -> Result<Option<u64>, ErrorReply> {
    match word {
        None | Some(&"-") | Some(&"") => Ok(None),
        Some(w) => w
            .parse()
            .map(Some)
            .map_err(|_| bad(format!("invalid VM id {w:?}"))),
    }
}

type Out = Arc<Mutex<UnixStream>>;

fn run(words: &[&str], supervisor: &Supervisor, out: &Out) -> Result<String, ErrorReply> {
    match words {
        ["status"] => Ok(to_line(&crate::supervisor::status(supervisor))),
        ["metrics"] => Ok(to_line(&crate::supervisor::metrics(supervisor))),
        ["checkpoint", file, rest @ ..] => {
            let worker = one(supervisor, rest.first())?;
            let then = rest.get(1).copied().unwrap_or("resume");
            if !["resume", "pause", "exit"].contains(&then) {
                return Err(bad(format!(
                    "unknown follow-up {then:?}: expected resume, pause or exit"
                )));
            }
            // The worker writes into the file the supervisor created next
            // to FILE; only a complete checkpoint replaces FILE.
            let mut words = vec!["checkpoint", then];
            if let Some(rounds) = rest.get(2) {
                // A count, or `cow`: no rounds, every buffer owed.
                if *rounds != "cow" {
                    rounds
                        .parse::<u32>()
                        .map_err(|_| bad(format!("invalid round count {rounds:?}")))?;
                }
                words.push(rounds);
            }
            let base = match rest.get(3) {
                Some(base) => Some(super::incremental::base_words(base, file)?),
                None => None,
            };
            if let Some((id, path)) = &base {
                words.extend([id.as_str(), path.as_str()]);
            }
            let written = vgpu_migration::write_atomically(Path::new(file), |w| {
                relay(&worker, &words, Some(w.get_ref()), out)
            });
            written.map_err(|e| match e {
                vgpu_migration::AtomicWriteError::Write { source, .. } => source,
                other => ErrorReply::new(
                    ErrorCode::CheckpointFailed,
                    format!(
                        "checkpoint of front-end {} failed: {}",
                        worker.vm_id,
                        error_chain(&other)
                    ),
                ),
            })
        }
        ["restore", file, vm, base] => {
            let worker = one(supervisor, Some(vm))?;
            super::incremental::restore(&worker, file, base, |merged| {
                relay(&worker, &["restore"], Some(merged), out)
            })
        }
        ["restore", file, rest @ ..] => {
            let worker = one(supervisor, rest.first())?;
            let f = File::open(file).map_err(|e| file_error(format!("cannot open {file}: {e}")))?;
            relay(&worker, &["restore"], Some(&f), out)
        }
        ["migration-base", file, rest @ ..] => {
            let worker = one(supervisor, rest.first())?;
            let (id, path) = super::incremental::base_words(file, "")?;
            let f =
                File::open(&path).map_err(|e| file_error(format!("cannot open {file}: {e}")))?;
            relay(&worker, &["migration-base", &id, &path], Some(&f), out)
        }
        ["rehome", spec] => {
            crate::config::parse_rehome_target(spec).map_err(bad)?;
            rehome(supervisor, spec, out)
        }
        ["profile", file, rest @ ..] => {
            let worker = one(supervisor, rest.first())?;
            let f =
                File::create(file).map_err(|e| file_error(format!("cannot write {file}: {e}")))?;
            relay(&worker, &["profile"], Some(&f), out)
        }
        ["accepts", file] => {
            let f = File::open(file).map_err(|e| file_error(format!("cannot read {file}: {e}")))?;
            // Any worker can answer for the device; the standby always is.
            let worker = supervisor.all().pop().ok_or_else(|| {
                ErrorReply::new(ErrorCode::NoDevice, "no worker has the device open")
            })?;
            relay(&worker, &["accepts", file], Some(&f), out)
        }
        ["pause", rest @ ..] => relay(&*one(supervisor, rest.first())?, &["pause"], None, out),
        ["resume", rest @ ..] => relay(&*one(supervisor, rest.first())?, &["resume"], None, out),
        _ => Err(ErrorReply::new(
            ErrorCode::UnknownCommand,
            format!("unknown command {:?}", words.join(" ")),
        )),
    }
}

/// Runs a command in a worker, passing its progress lines on.
fn relay(
    worker: &WorkerLink,
    words: &[&str],
    file: Option<&File>,
    out: &Out,
) -> Result<String, ErrorReply> {
    worker.request(words, file, &mut |line| {
        let _ = writeln!(out.lock().unwrap_or_else(|e| e.into_inner()), "{line}");
    })
}

/// Re-homes every worker at once (each moves its own VM) and makes later
/// workers open the new device.
fn rehome(supervisor: &Supervisor, spec: &str, out: &Out) -> Result<String, ErrorReply> {
    let workers = supervisor.rehome_later_workers(spec);
    let results: Vec<_> = std::thread::scope(|scope| {
        let running: Vec<_> = workers
            .iter()
            .map(|w| scope.spawn(move || relay(w, &["rehome", spec], None, out)))
            .collect();
        running.into_iter().map(|r| r.join()).collect()
    });
    let mut rehomed = Vec::new();
    let mut failures = Vec::new();
    for (worker, result) in workers.iter().zip(results) {
        let reply = result
            .unwrap_or_else(|_| Err(ErrorReply::new(ErrorCode::RehomeFailed, "relay panicked")))
            .and_then(|line| {
                serde_json::from_str::<RehomedReply>(&line)
                    .map_err(|e| ErrorReply::new(ErrorCode::RehomeFailed, e.to_string()))
            });
        match reply {
            // The standby moves too (its VM is still empty): only VMs count.
            Ok(reply) if worker.is_serving() => rehomed.extend(reply.rehomed),
            Ok(_) => {}
            Err(e) => failures.push(format!("worker {}: {}", worker.pid, e.message)),
        }
    }
    if !failures.is_empty() {
        return Err(ErrorReply::new(
            ErrorCode::RehomeFailed,
            failures.join("; "),
        ));
    }
    // What later workers will serve, as the newest one (the standby)
    // describes it.
    if let Some(newest) = supervisor.all().pop() {
        let status = newest.request(&["status"], None, &mut |_| {});
        if let Ok(Ok(reply)) = status.map(|l| serde_json::from_str::<StatusReply>(&l)) {
            supervisor.set_devices(reply.devices);
        }
    }
    log::info!("re-homed {} vGPU(s) to {spec}", rehomed.len());
    Ok(to_line(&RehomedReply { rehomed }))
}

/// The worker of the VM named, or of the only one.
fn one(supervisor: &Supervisor, word: Option<&&str>) -> Result<Arc<WorkerLink>, ErrorReply> {
    let id = vm_id(word)?;
    let mut serving = supervisor.serving(id);
    match (id, serving.len()) {
        (_, 1) => Ok(serving.remove(0)),
        (Some(id), _) => Err(ErrorReply::new(
            ErrorCode::NoVm,
            format!("no front-end {id} is connected"),
        )),
        (None, 0) => Err(ErrorReply::new(
            ErrorCode::NoVm,
            "no front-end is connected",
        )),
        (None, n) => Err(ErrorReply::new(
            ErrorCode::AmbiguousVm,
            format!("{n} front-ends are connected: name one with --vm ID"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_socket_is_open_to_its_owner_only() {
        let dir = std::env::temp_dir().join(format!("vgpu-control-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        let path = dir.join("control.sock");
        let listener = bind(&path).expect("bind the control socket");
        let mode = std::fs::metadata(&path)
            .expect("socket metadata")
            .permissions()
            .mode();
        drop(listener);
        std::fs::remove_dir_all(&dir).expect("remove scratch directory");
        assert_eq!(mode & 0o777, 0o600);
    }
}
