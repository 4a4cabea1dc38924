//! Bounds every decoder checks before it allocates or indexes.

/// Largest request stream (batch header and messages).
pub const MAX_REQUEST_LEN: u32 = 16 << 20;
/// Largest reply stream a guest may reserve.
pub const MAX_REPLY_LEN: u32 = 16 << 20;
/// Most messages in one batch.
pub const MAX_BATCH_COUNT: u32 = 4096;
/// Largest byte-string field (program source, binary, IL, kernel argument).
pub const MAX_BYTES_FIELD: u32 = 16 << 20;
/// Most elements in a list field (wait lists, properties, handles).
pub const MAX_LIST_LEN: u32 = 4096;
/// Most descriptors the backend follows in one chain.
pub const MAX_CHAIN_DESCRIPTORS: usize = 4096;
/// Largest bulk transfer one message may reference.
pub const MAX_DATA_LEN: u64 = 1 << 40;
/// Descriptor addresses from here on name the loopback front-end's own
/// virtual memory (address minus this base) rather than guest memory. Only
/// a backend that announced `SESSION_FLAG_PEER_MEMORY` follows them; for
/// every other (a VM's above all) they lie outside guest memory, as any
/// bad address does. User-space addresses of x86-64 and AArch64 stay far
/// below 2^63.
pub const PEER_WINDOW_BASE: u64 = 1 << 63;
