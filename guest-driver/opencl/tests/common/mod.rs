//! Scaffolding shared by the test files that run the API layer in this
//! process against the fake device.

pub mod fake;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use vgpu_transport::Client;

use fake::{FakeDevice, Log};

/// Installs the fake device once per test binary and returns its log.
/// The guard makes tests run one at a time: they count round trips and
/// read the log.
pub fn setup() -> (MutexGuard<'static, ()>, Arc<Mutex<Log>>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    static LOG: OnceLock<Arc<Mutex<Log>>> = OnceLock::new();
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let log = LOG
        .get_or_init(|| {
            let log = Arc::new(Mutex::new(Log::default()));
            let fake = FakeDevice { log: log.clone() };
            let client = Client::open(Box::new(fake), 1, false).expect("fake session");
            assert!(vgpu_opencl::install_client(client));
            log
        })
        .clone();
    (guard, log)
}
