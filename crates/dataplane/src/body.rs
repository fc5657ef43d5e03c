//! A live packet's bytes, one kind per backend: the [`PacketBody`] trait
//! says what the engine, `duplicate` and the captures read of it, and
//! [`bodies!`] makes the [`Body`] enum of the kinds the crate root lists,
//! one line each. A new backend brings its own kind (in its file, with the
//! trait) and its line there.

use crate::Body;

/// What every backend's packet tells the engine and the observer.
pub trait PacketBody {
    /// The Ethernet frame, for a bridged packet (`mac`, `layer2` rules);
    /// `None` for a host's, which is IP only.
    fn frame_bytes(&self) -> Option<&[u8]>;
    /// The IP packet, if it is one (ECN marking, checksums).
    fn ip_bytes(&self) -> Option<&[u8]>;
    fn ip_bytes_mut(&mut self) -> Option<&mut [u8]>;
    /// The copy `duplicate` makes, or `None` for a packet that cannot be
    /// copied (one the kernel holds for its verdict).
    fn duplicate(&self) -> Option<Body>;
    /// What a capture keeps: the frame from its Ethernet header, or the
    /// packet from its IP header.
    fn wire_bytes(&self) -> &[u8];
}

/// The kinds, each a variant that holds the backend's own type; the trait
/// is answered by a `match` over them (no allocation, no indirect call).
macro_rules! bodies {
    ($($(#[$doc:meta])* $kind:ident($ty:ty),)*) => {
        /// A live packet's bytes, as the backend that read it keeps them.
        #[derive(Debug)]
        pub enum Body {
            $($(#[$doc])* $kind($ty),)*
        }

        impl PacketBody for Body {
            #[inline]
            fn frame_bytes(&self) -> Option<&[u8]> {
                match self { $(Body::$kind(b) => b.frame_bytes(),)* }
            }
            #[inline]
            fn ip_bytes(&self) -> Option<&[u8]> {
                match self { $(Body::$kind(b) => b.ip_bytes(),)* }
            }
            #[inline]
            fn ip_bytes_mut(&mut self) -> Option<&mut [u8]> {
                match self { $(Body::$kind(b) => b.ip_bytes_mut(),)* }
            }
            #[inline]
            fn duplicate(&self) -> Option<Body> {
                match self { $(Body::$kind(b) => b.duplicate(),)* }
            }
            #[inline]
            fn wire_bytes(&self) -> &[u8] {
                match self { $(Body::$kind(b) => b.wire_bytes(),)* }
            }
        }
    };
}
pub(crate) use bodies;
