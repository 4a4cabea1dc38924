//! The one platform and the one device: the backend's device, reached
//! through a protocol session opened on the first platform query.

use std::sync::{Arc, OnceLock};

use opencl_sys::{CL_INVALID_PLATFORM, CL_PLATFORM_NAME};
use vgpu_protocol::messages::GetInfo;
use vgpu_protocol::InfoTarget;
use vgpu_transport::Client;

pub use crate::core::device::Device;
use crate::core::object::{kind, Cl, ClResult};

/// The platform object. Everything it knows is constant.
pub struct Platform;

kind!(Platform, CL_INVALID_PLATFORM, None);

/// The session with the device and the two objects it backs.
pub struct Connection {
    pub client: Client,
    pub platform: Arc<Cl<Platform>>,
    pub device: Arc<Cl<Device>>,
}

static CONNECTION: OnceLock<Option<Connection>> = OnceLock::new();

/// The connection, opened on first use with `Client::from_env()`. `None`
/// when the device cannot be reached (logged once when `VGPU_LOG` is set).
pub fn connection() -> Option<&'static Connection> {
    CONNECTION
        .get_or_init(|| {
            crate::core::log::init();
            match Client::from_env() {
                Ok(client) => Some(Connection::new(client)),
                Err(e) => {
                    crate::core::log::unavailable(&e);
                    None
                }
            }
        })
        .as_ref()
}

/// Uses `client` as the connection instead of `Client::from_env()` (tests
/// with a fake transport). Returns false when a connection already exists.
pub fn install(client: Client) -> bool {
    CONNECTION.set(Some(Connection::new(client))).is_ok()
}

/// The session, when one was opened. Objects other than the platform exist
/// only after that, so their methods may rely on it.
pub fn client_opt() -> Option<&'static Client> {
    CONNECTION.get().and_then(Option::as_ref).map(|c| &c.client)
}

/// The session, or `CL_DEVICE_NOT_AVAILABLE` when the device is gone.
pub fn client() -> ClResult<&'static Client> {
    client_opt().ok_or(opencl_sys::CL_DEVICE_NOT_AVAILABLE)
}

impl Connection {
    fn new(client: Client) -> Connection {
        Connection {
            client,
            platform: Cl::publish(0, Platform),
            device: Cl::publish(0, Device::new()),
        }
    }
}

/// The validated platform: NULL means ours, as for a single-platform ICD.
pub fn platform_or_default(ptr: *mut std::ffi::c_void) -> ClResult<Arc<Cl<Platform>>> {
    let connection = connection().ok_or(CL_INVALID_PLATFORM)?;
    if ptr.is_null() {
        return Ok(connection.platform.clone());
    }
    Cl::<Platform>::get(ptr)
}

/// The backing platform's name (for the device name), without its NUL.
pub fn backing_platform_name(client: &Client) -> String {
    let request = GetInfo {
        target: InfoTarget::Platform as u32,
        handle: 0,
        index: 0,
        param: CL_PLATFORM_NAME,
    };
    match client.call(request.into()) {
        Ok(bytes) => crate::core::info::c_string(&bytes),
        Err(status) => {
            log::warn!("backing platform name unavailable: {status}");
            String::from("unknown platform")
        }
    }
}
