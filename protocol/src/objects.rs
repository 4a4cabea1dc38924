//! Object kinds that handles name, and the targets of info queries.

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            pub fn from_u32(value: u32) -> Option<Self> {
                match value {
                    $($value => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

wire_enum! {
    /// The kind of object a handle names; each kind has its own handle table.
    ObjectKind {
        Context = 1,
        Queue = 2,
        Mem = 3,
        Program = 4,
        Kernel = 5,
        Event = 6,
        Sampler = 7,
        /// A sub-device (the root device has no handle).
        Device = 8,
    }
}

wire_enum! {
    /// Which `clGet*Info` a `GetInfo` message asks.
    InfoTarget {
        Platform = 1,
        Device = 2,
        Context = 3,
        Queue = 4,
        Mem = 5,
        Program = 6,
        ProgramBuild = 7,
        Kernel = 8,
        KernelArg = 9,
        KernelWorkGroup = 10,
        Event = 11,
        EventProfiling = 12,
    }
}

wire_enum! {
    /// How a `SetKernelArg` message passes its value.
    ArgKind {
        /// `value` holds the bytes (`size` must equal its length).
        Value = 1,
        /// `handle` names a memory object.
        Mem = 2,
        /// `__local` memory of `size` bytes.
        Local = 3,
        /// A NULL buffer argument.
        NullMem = 4,
        /// `handle` names a sampler.
        Sampler = 5,
        /// `value` holds an SVM address (8 bytes, little-endian).
        Svm = 6,
    }
}

impl ObjectKind {
    /// Handle kind's index into per-kind arrays (0-based).
    pub fn index(self) -> usize {
        self as usize - 1
    }
}
