//! Sending a batch with `sendmmsg`, and what each refusal means.

use std::os::fd::AsRawFd;

use nix::errno::Errno;

use super::mmsg::send_mmsg;
use super::{Port, PortError, SendError, TxFrame, VnetHdr, MAX_BATCH};

impl Port {
    /// Sends `frames` in batches of [`PortOptions::batch`](super::PortOptions::batch) per `sendmmsg`.
    /// `Ok(n)` means all `n` were accepted. On a refusal, [`SendError`] says
    /// how many went before it and why the next one did not go, so the caller
    /// can keep it for later (`WouldBlock`: poll for `POLLOUT`) or count it as
    /// a drop with that reason.
    pub fn send_batch(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, SendError> {
        let mut done = 0;
        while done < frames.len() {
            let end = frames.len().min(done + self.opts.batch);
            let chunk = &frames[done..end];
            let mut headers = [[0u8; VnetHdr::LEN]; MAX_BATCH];
            for (frame, header) in chunk.iter().zip(headers.iter_mut()) {
                if let Some(v) = frame.vnet {
                    *header = v.to_bytes();
                }
            }
            match send_mmsg(self.fd.as_raw_fd(), chunk, &headers) {
                // sendmmsg reports an error only when the first message fails;
                // after a partial send, the loop tries again from the first
                // frame not sent and so learns the reason.
                Ok(sent) => {
                    for frame in &chunk[..sent] {
                        self.stats.tx_frames += 1;
                        self.stats.tx_bytes += frame.data.len() as u64;
                    }
                    done += sent;
                }
                Err(Errno::EINTR) => {}
                Err(errno) => {
                    let error = self.send_error(errno, &chunk[0]);
                    return Err(SendError { sent: done, error });
                }
            }
        }
        Ok(done)
    }

    fn send_error(&mut self, errno: Errno, frame: &TxFrame<'_>) -> PortError {
        let ifname = self.ifname.clone();
        match errno {
            Errno::EAGAIN => {
                self.stats.tx_would_block += 1;
                PortError::WouldBlock { ifname }
            }
            Errno::ENOBUFS => {
                self.stats.tx_no_buffers += 1;
                PortError::NoBuffers { ifname }
            }
            Errno::EMSGSIZE => {
                self.stats.tx_refused += 1;
                PortError::TooLarge {
                    ifname,
                    len: frame.data.len(),
                }
            }
            Errno::EINVAL => {
                self.stats.tx_refused += 1;
                PortError::Refused {
                    ifname,
                    len: frame.data.len(),
                    vnet: frame.vnet,
                }
            }
            _ => {
                self.stats.tx_refused += 1;
                self.error("sendmmsg", errno)
            }
        }
    }
}
