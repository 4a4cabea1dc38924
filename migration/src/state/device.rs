//! Which device a state, or a program binary, came from.

use crate::codec::record;

record! {
    /// Names one OpenCL device and driver. A device binary is only loaded
    /// on a device whose identity is equal; anywhere else programs are
    /// rebuilt from source or IL.
    #[derive(Default)]
    pub struct DeviceIdentity {
        /// `CL_DEVICE_VENDOR_ID`.
        pub vendor_id: u32,
        /// `CL_DEVICE_VENDOR`.
        pub vendor: String,
        /// `CL_DEVICE_NAME`.
        pub name: String,
        /// `CL_DEVICE_VERSION`.
        pub device_version: String,
        /// `CL_DRIVER_VERSION`.
        pub driver_version: String,
        /// `CL_PLATFORM_NAME` of the device's platform.
        pub platform: String,
    }
}

impl DeviceIdentity {
    /// Whether a binary built for `self` may be loaded on `other`.
    pub fn binaries_run_on(&self, other: &DeviceIdentity) -> bool {
        self == other
    }
}

impl std::fmt::Display for DeviceIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {}, driver {})",
            self.name, self.platform, self.device_version, self.driver_version
        )
    }
}
