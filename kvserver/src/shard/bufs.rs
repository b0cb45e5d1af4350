//! Spare connection buffers of one shard.

/// Spare read and output buffers of one shard's connections.
///
/// A connection takes a pair when its socket turns readable and gives it back once its
/// batch is answered and nothing partial is left, so 10,000 idle clients hold no buffers
/// while busy ones reuse the same few. Only standard-size buffers come back; one grown for
/// a large command or reply is freed instead.
#[derive(Default)]
pub struct BufPool {
    read: Vec<Vec<u8>>,
    out: Vec<Vec<u8>>,
}

impl BufPool {
    /// Size of a read buffer; output buffers start with this capacity.
    pub const CHUNK: usize = 16 * 1024;
    /// Spares kept of each kind.
    const KEEP: usize = 256;

    /// A read buffer of exactly [`Self::CHUNK`] bytes (contents unspecified).
    pub fn take_read(&mut self) -> Vec<u8> {
        self.read.pop().unwrap_or_else(|| vec![0; Self::CHUNK])
    }

    /// An empty output buffer.
    pub fn take_out(&mut self) -> Vec<u8> {
        self.out
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(Self::CHUNK))
    }

    /// Returns a read buffer (kept only if it still has the standard size).
    pub fn put_read(&mut self, buf: Vec<u8>) {
        if buf.len() == Self::CHUNK && self.read.len() < Self::KEEP {
            self.read.push(buf);
        }
    }

    /// Returns an output buffer (kept only if it did not grow far past the standard size).
    pub fn put_out(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() >= Self::CHUNK
            && buf.capacity() <= 4 * Self::CHUNK
            && self.out.len() < Self::KEEP
        {
            buf.clear();
            self.out.push(buf);
        }
    }
}
