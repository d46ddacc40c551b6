//! The bottom room: what every layer above may use and which knows nothing of the model. A clock
//! that works in the browser too, stop requests and liveness beats from inside long units of work,
//! the one thread pool work fans out on, how a native process keeps scratch memory, the FNV-1a
//! checksum, how enums spell their values, and how JSON carries a non-finite number.

pub mod checksum;
pub mod clock;
pub mod float_text;
pub mod heap;
pub mod heartbeat;
pub mod names;
pub mod pool;
