//! Header parsing: raw frames to [`crate::PacketInfo`] facts. (In progress.)
