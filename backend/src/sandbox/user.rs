//! Dropping root for good: the worker holds a device and serves one VM, and
//! needs no privilege for either once the device is open.

use std::ffi::CString;
use std::io;

/// `nobody`/`nogroup`, used when neither `--user` nor a `vgpu` user exists.
const NOBODY: libc::uid_t = 65534;
/// The account a worker runs as when started as root without `--user`.
const DEFAULT_USER: &str = "vgpu";

/// Who the worker becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// Supplementary groups (e.g. `render`, `video` for device nodes).
    pub groups: Vec<libc::gid_t>,
}

fn euid() -> libc::uid_t {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Looks `name` up in the user database; `None` when there is no such user.
fn lookup(name: &str) -> io::Result<Option<Credentials>> {
    let cname = CString::new(name).map_err(|_| io::Error::other("user name contains NUL"))?;
    // SAFETY: an all-zero passwd is a valid value to be overwritten.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: every pointer is valid for the call and `buf.len()` is its
    // size; getpwnam_r writes only into `pw`, `buf` and `found`.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if found.is_null() {
        return Ok(None);
    }
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut count = groups.len() as libc::c_int;
    // SAFETY: `groups` holds `count` entries; getgrouplist writes at most
    // that many and stores the real count in `count`.
    let rc =
        unsafe { libc::getgrouplist(cname.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut count) };
    if rc < 0 {
        return Err(io::Error::other(format!(
            "user {name:?} is in more than {} groups",
            groups.len()
        )));
    }
    groups.truncate(count.max(0) as usize);
    Ok(Some(Credentials {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        groups,
    }))
}

/// Whom to become: `user` if given, else (when root) the `vgpu` user or
/// `nobody`. `None` when not root and no other user is asked for: the
/// worker keeps the unprivileged user it was started as.
pub fn target(user: Option<&str>) -> io::Result<Option<Credentials>> {
    let root = euid() == 0;
    let creds = match user {
        Some(name) => lookup(name)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no user {name:?}")))?,
        None if !root => return Ok(None),
        None => lookup(DEFAULT_USER)?.unwrap_or(Credentials {
            name: "nobody".into(),
            uid: NOBODY,
            gid: NOBODY,
            groups: Vec::new(),
        }),
    };
    if creds.uid == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("user {:?} is root: a worker never runs as root", creds.name),
        ));
    }
    if !root {
        // SAFETY: getuid has no preconditions.
        if creds.uid == unsafe { libc::getuid() } {
            return Ok(None);
        }
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("becoming user {:?} needs root", creds.name),
        ));
    }
    Ok(Some(creds))
}

/// Whom a worker becomes: [`target`], or with `own_uid` (`--worker-uids`,
/// root only) that uid with the group of the same number, keeping the
/// supplementary groups of [`target`]'s user (device nodes are often
/// reachable through a group such as `render` or `video`). A uid of its
/// own keeps one VM's worker from signalling another's and gives its
/// process limit a count of its own.
pub fn for_worker(user: Option<&str>, own_uid: Option<u32>) -> io::Result<Option<Credentials>> {
    let base = target(user)?;
    let Some(uid) = own_uid else {
        return Ok(base);
    };
    if euid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "--worker-uids needs the backend to start as root",
        ));
    }
    if uid == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a worker never runs as root (uid 0 in --worker-uids)",
        ));
    }
    Ok(Some(Credentials {
        name: format!("uid {uid}"),
        uid,
        gid: uid,
        groups: base.map(|c| c.groups).unwrap_or_default(),
    }))
}

fn check(rc: libc::c_int, what: &str) -> io::Result<()> {
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    Err(io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// Reads one field of `/proc/self/status`, e.g. `CapEff`.
pub fn status_field(name: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim().to_string())
    })
}

/// Becomes `creds` in every thread (glibc's set*id wrappers reach all
/// threads), then checks that root cannot come back.
pub fn drop_to(creds: &Credentials) -> io::Result<()> {
    let (uid, gid) = (creds.uid, creds.gid);
    // SAFETY: `groups` holds `len` gids; the rest are plain system calls
    // on this process's credentials.
    unsafe {
        check(
            libc::setgroups(creds.groups.len(), creds.groups.as_ptr()),
            "setgroups",
        )?;
        check(libc::setresgid(gid, gid, gid), "setresgid")?;
        check(libc::setresuid(uid, uid, uid), "setresuid")?;
    }
    verify_dropped(creds)
}

fn verify_dropped(creds: &Credentials) -> io::Result<()> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: the three pointers are valid for the call.
    let rc = unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    check(rc, "getresuid")?;
    let (mut rg, mut eg, mut sg) = (0, 0, 0);
    // SAFETY: the three pointers are valid for the call.
    let rc = unsafe { libc::getresgid(&mut rg, &mut eg, &mut sg) };
    check(rc, "getresgid")?;
    let ids_ok =
        [r, e, s].iter().all(|&u| u == creds.uid) && [rg, eg, sg].iter().all(|&g| g == creds.gid);
    // SAFETY: plain system calls; each must fail now.
    let regained = unsafe { libc::setuid(0) == 0 || libc::setgid(0) == 0 };
    let caps_gone = ["CapPrm", "CapEff"]
        .iter()
        .all(|f| status_field(f).is_some_and(|v| v.trim_start_matches('0').is_empty()));
    if ids_ok && !regained && caps_gone {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "still privileged after dropping to {:?} (uids {r}/{e}/{s}, gids {rg}/{eg}/{sg}, \
             setuid(0) {}, capabilities {})",
            creds.name,
            if regained { "worked" } else { "failed" },
            if caps_gone { "none" } else { "left" },
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_never_a_worker_user() {
        let err = target(Some("root")).expect_err("root must be refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn unknown_user_is_an_error() {
        let err = target(Some("no-such-user-vgpu-test")).expect_err("unknown user");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_workers_own_uid_is_never_root() {
        if euid() != 0 {
            let err = for_worker(None, Some(4242)).expect_err("needs root");
            assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
            return;
        }
        let err = for_worker(None, Some(0)).expect_err("uid 0 must be refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        let creds = for_worker(None, Some(4242)).unwrap().unwrap();
        assert_eq!((creds.uid, creds.gid), (4242, 4242));
    }

    #[test]
    fn status_field_reads_this_process() {
        let pid = status_field("Pid").expect("Pid line");
        assert_eq!(pid, std::process::id().to_string());
        assert_eq!(status_field("NoSuchField"), None);
    }
}
