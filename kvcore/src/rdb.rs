//! Redis's RDB value encoding: what DUMP writes and RESTORE reads (and, later, what a snapshot
//! holds per key).
//!
//! A value is a type byte and its body. Lengths are 6-, 14-, 32- or 64-bit (`00`, `01`,
//! `0x80`, `0x81`); a first byte `11xxxxxx` starts a string encoded as an 8-, 16- or 32-bit
//! integer or compressed with LZF. Strings of at most 11 bytes that are integers in `i32`
//! range are written as integers; longer than 20 bytes, compressed when LZF saves at least
//! four bytes (Redis's `rdbcompression yes`). Collections are written as Redis 7.0 writes
//! them (RDB version 10): listpack and intset blobs as strings, a list as a quicklist of
//! listpack nodes, big collections element by element, big sorted sets from the highest
//! score down with binary doubles. A hash with field deadlines needs version 12 (Redis 7.4's
//! `HASH_METADATA`). Reading accepts every type Redis 7.4 writes and checks everything: a
//! blob is taken apart and rebuilt, never trusted.
//!
//! A DUMP payload is the value, the RDB version (2 bytes, little-endian) and a CRC-64 (Jones,
//! reflected, as Redis's `crc64`) of all that before it (8 bytes, little-endian).

use crate::hash::Hash;
use crate::list::List;
use crate::listpack::Listpack;
use crate::set::{intset, Set};
use crate::stream::{Consumer, Group, Nack, Stream, StreamId};
use crate::value::{Stored, Value};
use crate::zset::ZSet;

/// The newest RDB version read (Redis 7.4).
pub const VERSION_MAX: u16 = 12;
/// The version written when the value fits it (Redis 7.0's, which Redis 7.0 loads).
pub const VERSION_BASE: u16 = 10;
/// The version written for a hash with field deadlines.
pub const VERSION_FIELD_TTL: u16 = 12;

const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_ZSET: u8 = 3;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_2: u8 = 5;
const TYPE_SET_INTSET: u8 = 11;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_ZSET_LISTPACK: u8 = 17;
const TYPE_LIST_QUICKLIST_2: u8 = 18;
const TYPE_SET_LISTPACK: u8 = 20;
const TYPE_STREAM_LISTPACKS: u8 = 15;
const TYPE_STREAM_LISTPACKS_2: u8 = 19;
const TYPE_STREAM_LISTPACKS_3: u8 = 21;
const TYPE_HASH_METADATA_PRE_GA: u8 = 22;
const TYPE_HASH_LISTPACK_EX_PRE_GA: u8 = 23;
const TYPE_HASH_METADATA: u8 = 24;
const TYPE_HASH_LISTPACK_EX: u8 = 25;

const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

const QUICKLIST_PLAIN: u64 = 1;
const QUICKLIST_PACKED: u64 = 2;

// Slice-by-16 tables: a whole file's checksum at several GB/s rather than a few hundred MB/s
// (the writer of a 10M-key snapshot shares its core with a shard).
static CRC64: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// A running CRC-64 of a file being written (see [`file_digest`]).
pub type FileDigest = crc::Digest<'static, u64, crc::Table<16>>;

/// Redis's CRC-64 of `bytes`.
pub fn crc64(bytes: &[u8]) -> u64 {
    CRC64.checksum(bytes)
}

/// The encoding limits a value read is rebuilt under (the store's configuration).
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// `hash-max-listpack-*`.
    pub hash: crate::hash::Limits,
    /// `list-max-listpack-size`.
    pub list: crate::list::Limits,
    /// `set-max-intset-entries`, `set-max-listpack-*`.
    pub set: crate::set::Limits,
    /// `zset-max-listpack-*`.
    pub zset: crate::zset::Limits,
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Appends an RDB length to `out`.
fn length(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends RDB pieces to a buffer.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes written.
    pub out: Vec<u8>,
    /// Whether long strings are LZF-compressed (`rdbcompression`).
    pub compress: bool,
    /// The list node limits, which tell plain nodes (one large element) from packed ones.
    pub list_limits: crate::list::Limits,
}

impl Writer {
    /// A writer that compresses as Redis does by default.
    pub fn new() -> Writer {
        Writer {
            out: Vec::new(),
            compress: true,
            list_limits: crate::list::Limits::default(),
        }
    }

    /// A length.
    pub fn length(&mut self, n: u64) {
        length(&mut self.out, n);
    }

    /// An integer in the shortest integer string encoding, if it fits one (`i32`).
    fn try_int(&mut self, v: i64) -> bool {
        if let Ok(b) = i8::try_from(v) {
            self.out.extend_from_slice(&[0xC0 | ENC_INT8, b as u8]);
        } else if let Ok(h) = i16::try_from(v) {
            self.out.push(0xC0 | ENC_INT16);
            self.out.extend_from_slice(&h.to_le_bytes());
        } else if let Ok(w) = i32::try_from(v) {
            self.out.push(0xC0 | ENC_INT32);
            self.out.extend_from_slice(&w.to_le_bytes());
        } else {
            return false;
        }
        true
    }

    /// A string, as Redis's rdbSaveRawString writes it.
    pub fn string(&mut self, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = crate::num::parse_i64(s) {
                if self.try_int(v) {
                    return;
                }
            }
        }
        // As Redis: compressed when that saves at least 4 bytes.
        if self.compress && s.len() > 20 {
            let out = &mut self.out;
            let packed = crate::lzf::with(|c| {
                c.compress(s, s.len() - 4, |packed| {
                    out.push(0xC0 | ENC_LZF);
                    length(out, packed.len() as u64);
                    length(out, s.len() as u64);
                    out.extend_from_slice(packed);
                })
            });
            if packed.is_some() {
                return;
            }
        }
        self.length(s.len() as u64);
        self.out.extend_from_slice(s);
    }

    /// An integer string value (Redis's rdbSaveLongLongAsStringObject).
    pub fn int_string(&mut self, v: i64) {
        if !self.try_int(v) {
            let mut buf = itoa::Buffer::new();
            let s = buf.format(v).as_bytes();
            self.length(s.len() as u64);
            self.out.extend_from_slice(s);
        }
    }

    fn double(&mut self, v: f64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn millis(&mut self, ms: u64) {
        self.out.extend_from_slice(&ms.to_le_bytes());
    }

    /// A value's type byte and body; returns the RDB version it needs.
    pub fn value<'a>(&mut self, v: impl Into<Stored<'a>>) -> u16 {
        let v = match v.into() {
            Stored::Str(s) => {
                self.out.push(TYPE_STRING);
                self.string(s);
                return VERSION_BASE;
            }
            Stored::Int(n) => {
                self.out.push(TYPE_STRING);
                self.int_string(n);
                return VERSION_BASE;
            }
            Stored::Value(v) => v,
        };
        match v {
            Value::Int(n) => {
                self.out.push(TYPE_STRING);
                self.int_string(*n);
            }
            Value::Inline(s) => {
                self.out.push(TYPE_STRING);
                self.string(s);
            }
            Value::Str(s) => {
                self.out.push(TYPE_STRING);
                self.string(s);
            }
            Value::Raw(s) => {
                self.out.push(TYPE_STRING);
                self.string(s);
            }
            Value::List(l) => {
                self.out.push(TYPE_LIST_QUICKLIST_2);
                let nodes = l.rdb_nodes(self.list_limits);
                self.length(nodes.len() as u64);
                for (plain, n) in nodes {
                    match n.first().filter(|_| plain) {
                        // A plain node is its element's bytes.
                        Some(p) => {
                            self.length(QUICKLIST_PLAIN);
                            self.string(&n.get(p).to_vec());
                        }
                        None => {
                            self.length(QUICKLIST_PACKED);
                            self.string(n.as_bytes());
                        }
                    }
                }
            }
            Value::Set(s) => match s {
                Set::Small(lp) if intset::is_intset(lp.raw_bytes()) => {
                    self.out.push(TYPE_SET_INTSET);
                    self.string(lp.raw_bytes());
                }
                _ => {
                    // Version 10 has no listpack sets: members one by one.
                    self.out.push(TYPE_SET);
                    self.length(s.len() as u64);
                    s.for_each(|m| self.string(m));
                }
            },
            Value::ZSet(z) => match z {
                ZSet::Listpack(_) => {
                    // Redis's listpack: member, score, ... with scores as d2string writes them.
                    let mut items: Vec<Vec<u8>> = Vec::with_capacity(2 * z.len());
                    z.range(0, z.len(), false, |m, s| {
                        items.push(m.to_vec());
                        items.push(score_text(s));
                    });
                    let lp = <Listpack>::from_items(items.iter().map(Vec::as_slice));
                    self.out.push(TYPE_ZSET_LISTPACK);
                    self.string(lp.as_bytes());
                }
                ZSet::Big(_) => {
                    self.out.push(TYPE_ZSET_2);
                    self.length(z.len() as u64);
                    z.range(0, z.len(), true, |m, s| {
                        self.string(m);
                        self.double(s);
                    });
                }
            },
            Value::Hash(h) => return self.hash(h),
            Value::Stream(st) => return self.stream(st),
        }
        VERSION_BASE
    }

    /// A stream: its nodes as they are, its counters, its groups, as type 19 (RDB 10, which
    /// Redis 7.0 reads too): consumers' active times are not kept (Redis 7.2+ reads them as
    /// their seen times).
    fn stream(&mut self, s: &Stream) -> u16 {
        self.out.push(TYPE_STREAM_LISTPACKS_2);
        self.length(s.node_count() as u64);
        for (master, lp) in s.nodes() {
            self.string(&master.to_be_bytes());
            self.string(lp.as_bytes());
        }
        for n in [
            s.len(),
            s.last_id.ms,
            s.last_id.seq,
            s.first_id.ms,
            s.first_id.seq,
            s.max_deleted.ms,
            s.max_deleted.seq,
            s.entries_added,
        ] {
            self.length(n);
        }
        self.length(s.groups.len() as u64);
        for (name, g) in &s.groups {
            self.string(name);
            self.length(g.last_id.ms);
            self.length(g.last_id.seq);
            self.length(g.entries_read as u64);
            self.length(g.pel.len() as u64);
            for (id, nack) in &g.pel {
                self.out.extend_from_slice(&id.to_be_bytes());
                self.millis(nack.delivery_time);
                self.length(nack.delivery_count);
            }
            self.length(g.consumers.len() as u64);
            for (name, c) in &g.consumers {
                self.string(name);
                self.millis(c.seen_time);
                self.length(c.pel.len() as u64);
                for id in &c.pel {
                    self.out.extend_from_slice(&id.to_be_bytes());
                }
            }
        }
        VERSION_BASE
    }

    fn hash(&mut self, h: &Hash) -> u16 {
        match h {
            Hash::Pack(lp) => {
                self.out.push(TYPE_HASH_LISTPACK);
                self.string(lp.to_redis().as_bytes());
                VERSION_BASE
            }
            Hash::Table(_) if !h.has_ttls() => {
                self.out.push(TYPE_HASH);
                self.length(h.len() as u64);
                h.for_each(|f, v| {
                    self.string(f);
                    self.string(v);
                });
                VERSION_BASE
            }
            Hash::Table(_) => {
                let mut deadlines = Vec::with_capacity(h.len());
                h.for_each(|f, v| {
                    let at = h.field_deadline(f).flatten();
                    deadlines.push((f.to_vec(), v.to_vec(), at));
                });
                let min = deadlines.iter().filter_map(|d| d.2).min().unwrap_or(0);
                self.out.push(TYPE_HASH_METADATA);
                self.millis(min);
                self.length(deadlines.len() as u64);
                for (f, v, at) in deadlines {
                    // 0: no deadline; else relative to the earliest, plus one.
                    self.length(at.map_or(0, |at| at - min + 1));
                    self.string(&f);
                    self.string(&v);
                }
                VERSION_FIELD_TTL
            }
        }
    }
}

/// A score as Redis's d2string writes it into a sorted set's listpack: integral values in
/// `±2^62` as integers, `-0` and the infinities by name, others as `%.17g` (Redis 7.0;
/// 7.2 writes the shortest form, both read back the same).
fn score_text(s: f64) -> Vec<u8> {
    if s == 0.0 {
        return if s.is_sign_negative() {
            b"-0".to_vec()
        } else {
            b"0".to_vec()
        };
    }
    if s.is_finite() && s.fract() == 0.0 && s.abs() <= (i64::MAX / 2) as f64 {
        return (s as i64).to_string().into_bytes();
    }
    let mut buf = [0u8; crate::resp::float::DOUBLE_BUF_LEN];
    crate::resp::float::format_double_17g(s, &mut buf).to_vec()
}

/// The DUMP payload of a value, whose lists have nodes cut by `list_limits`.
pub fn dump<'a>(v: impl Into<Stored<'a>>, list_limits: crate::list::Limits) -> Vec<u8> {
    let mut w = Writer::new();
    w.list_limits = list_limits;
    let version = w.value(v);
    w.out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(&w.out);
    w.out.extend_from_slice(&crc.to_le_bytes());
    w.out
}

/// The bytes Redis's `DEBUG OBJECT` reports as `serializedlength`: the value's body without
/// its type byte.
pub fn serialized_len<'a>(v: impl Into<Stored<'a>>, list_limits: crate::list::Limits) -> usize {
    let mut w = Writer::new();
    w.list_limits = list_limits;
    w.value(v);
    w.out.len() - 1
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// Why a payload or value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RdbError {
    /// Too short, a newer version, or a checksum mismatch (DUMP's footer).
    Footer,
    /// The value is malformed, truncated, empty, or of a type this server does not hold.
    BadData(&'static str),
}

type Result<T> = std::result::Result<T, RdbError>;

fn bad<T>(why: &'static str) -> Result<T> {
    Err(RdbError::BadData(why))
}

/// Reads RDB pieces from a buffer, every length bounded by what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    /// Bytes read so far.
    pub pos: usize,
}

/// A length or a special string encoding.
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return bad("truncated");
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn len_or_enc(&mut self) -> Result<Len> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3F)),
            1 => Len::Plain(u64::from(first & 0x3F) << 8 | u64::from(self.byte()?)),
            3 => Len::Encoded(first & 0x3F),
            _ => match first {
                0x80 => Len::Plain(u64::from(u32::from_be_bytes(
                    self.take(4)?.try_into().unwrap_or_default(),
                ))),
                0x81 => Len::Plain(u64::from_be_bytes(
                    self.take(8)?.try_into().unwrap_or_default(),
                )),
                _ => return bad("unknown length encoding"),
            },
        })
    }

    /// A length.
    pub fn length(&mut self) -> Result<u64> {
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => bad("encoded value where a length was expected"),
        }
    }

    /// A count of items each at least `min_bytes` long: bounded by what is left.
    fn count(&mut self, min_bytes: usize) -> Result<usize> {
        let n = self.length()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return bad("count larger than the payload");
        }
        Ok(n as usize)
    }

    /// A string in any of its encodings.
    pub fn string(&mut self) -> Result<Vec<u8>> {
        match self.len_or_enc()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).or(bad("string too long"))?;
                Ok(self.take(n)?.to_vec())
            }
            Len::Encoded(ENC_INT8) => Ok((self.take(1)?[0] as i8).to_string().into_bytes()),
            Len::Encoded(ENC_INT16) => {
                let b = self.take(2)?;
                Ok(i16::from_le_bytes([b[0], b[1]]).to_string().into_bytes())
            }
            Len::Encoded(ENC_INT32) => {
                let b = self.take(4)?;
                Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    .to_string()
                    .into_bytes())
            }
            Len::Encoded(ENC_LZF) => {
                let clen = usize::try_from(self.length()?).or(bad("string too long"))?;
                let len = usize::try_from(self.length()?).or(bad("string too long"))?;
                let packed = self.take(clen)?;
                // LZF expands at most about 1 + 2^13 / 2 ... bytes per input byte pair; a
                // length beyond what the input could give is refused before allocating.
                if len == 0 || len > clen.saturating_mul(90).saturating_add(64) {
                    return bad("LZF length out of proportion");
                }
                match lzf::decompress(packed, len) {
                    Ok(out) if out.len() == len => Ok(out),
                    _ => bad("LZF data malformed"),
                }
            }
            Len::Encoded(_) => bad("unknown string encoding"),
        }
    }

    fn binary_double(&mut self) -> Result<f64> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// A score of the old ZSET type: length byte, then text (253 NaN, 254 +inf, 255 -inf).
    fn text_double(&mut self) -> Result<f64> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let t = self.take(usize::from(n))?;
                std::str::from_utf8(t)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .map_or(bad("bad double"), Ok)
            }
        }
    }

    fn millis(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }

    /// A value of type `ty`, rebuilt under `limits`; fields whose deadline is at or before
    /// `now_ms` are left out.
    pub fn value(&mut self, ty: u8, limits: Limits, now_ms: u64) -> Result<Value> {
        let v = match ty {
            TYPE_STRING => Value::from_bytes(&self.string()?),
            TYPE_LIST_QUICKLIST_2 => self.quicklist(limits)?,
            TYPE_LIST => {
                let n = self.count(1)?;
                let items = (0..n).map(|_| self.string()).collect::<Result<Vec<_>>>()?;
                Value::List(List::from_items(limits.list, &items))
            }
            TYPE_SET => {
                let n = self.count(1)?;
                let members = (0..n).map(|_| self.string()).collect::<Result<Vec<_>>>()?;
                set_of(limits, members)?
            }
            TYPE_SET_INTSET => {
                let blob = self.string()?;
                let Some(width) = intset::width(&blob) else {
                    return bad("bad intset");
                };
                let n = intset::len(&blob);
                if blob.len() != 8 + n * width {
                    return bad("bad intset length");
                }
                let values: Vec<i64> = intset::iter(&blob).collect();
                if values.windows(2).any(|w| w[0] >= w[1]) {
                    return bad("intset not sorted");
                }
                let members = values.iter().map(|v| v.to_string().into_bytes()).collect();
                set_of(limits, members)?
            }
            TYPE_SET_LISTPACK => {
                let items = listpack_items(self.string()?)?;
                set_of(limits, items)?
            }
            TYPE_ZSET | TYPE_ZSET_2 => {
                let n = self.count(2)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = self.string()?;
                    let s = if ty == TYPE_ZSET_2 {
                        self.binary_double()?
                    } else {
                        self.text_double()?
                    };
                    items.push((m, s));
                }
                zset_of(limits, items)?
            }
            TYPE_ZSET_LISTPACK => {
                let items = listpack_items(self.string()?)?;
                if items.len() % 2 != 0 {
                    return bad("odd sorted set listpack");
                }
                let mut pairs = Vec::with_capacity(items.len() / 2);
                for p in items.chunks_exact(2) {
                    let score = std::str::from_utf8(&p[1])
                        .ok()
                        .and_then(|t| crate::num::parse_f64(t.as_bytes()))
                        .map_or(bad("bad score"), Ok)?;
                    pairs.push((p[0].clone(), score));
                }
                zset_of(limits, pairs)?
            }
            TYPE_HASH => {
                let n = self.count(2)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    fields.push((self.string()?, self.string()?, None));
                }
                hash_of(limits, fields, now_ms)?
            }
            TYPE_HASH_LISTPACK => {
                let items = listpack_items(self.string()?)?;
                if items.len() % 2 != 0 {
                    return bad("odd hash listpack");
                }
                let mut it = items.into_iter();
                let mut fields = Vec::new();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    fields.push((f, v, None));
                }
                hash_of(limits, fields, now_ms)?
            }
            TYPE_HASH_METADATA | TYPE_HASH_METADATA_PRE_GA => {
                let min = if ty == TYPE_HASH_METADATA {
                    self.millis()?
                } else {
                    0
                };
                let n = self.count(3)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let ttl = self.length()?;
                    let at = match (ty, ttl) {
                        (_, 0) => None,
                        (TYPE_HASH_METADATA, t) => Some(min.saturating_add(t - 1)),
                        (_, t) => Some(t),
                    };
                    fields.push((self.string()?, self.string()?, at));
                }
                hash_of(limits, fields, now_ms)?
            }
            TYPE_HASH_LISTPACK_EX | TYPE_HASH_LISTPACK_EX_PRE_GA => {
                if ty == TYPE_HASH_LISTPACK_EX {
                    self.millis()?;
                }
                let items = listpack_items(self.string()?)?;
                if items.len() % 3 != 0 {
                    return bad("hash listpack with deadlines not in triplets");
                }
                let mut fields = Vec::new();
                for t in items.chunks_exact(3) {
                    let at = crate::num::parse_i64(&t[2])
                        .filter(|&v| v >= 0)
                        .map_or(bad("bad field deadline"), Ok)?;
                    fields.push((t[0].clone(), t[1].clone(), (at != 0).then_some(at as u64)));
                }
                hash_of(limits, fields, now_ms)?
            }
            TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
                Value::Stream(Box::new(self.stream(ty)?))
            }
            _ => return bad("unsupported value type"),
        };
        Ok(v)
    }

    fn id(&mut self) -> Result<StreamId> {
        Ok(StreamId::new(self.length()?, self.length()?))
    }

    fn raw_id(&mut self) -> Result<StreamId> {
        StreamId::from_be_bytes(self.take(16)?).map_or(bad("bad stream ID"), Ok)
    }

    /// A stream of type 15, 19 or 21, checked whole: nodes, counts, and every pending entry
    /// owned by exactly one consumer.
    fn stream(&mut self, ty: u8) -> Result<Stream> {
        let n = self.count(2)?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            let key = self.string()?;
            let Some(master) = StreamId::from_be_bytes(&key) else {
                return bad("stream node key is not the size of a stream ID");
            };
            let Some(lp) = <Listpack>::from_blob(self.string()?.into_boxed_slice()) else {
                return bad("bad stream listpack");
            };
            nodes.push((master, lp));
        }
        let length = self.length()?;
        let last_id = self.id()?;
        let v2 = ty != TYPE_STREAM_LISTPACKS;
        let (first_id, max_deleted, added) = if v2 {
            (self.id()?, self.id()?, self.length()?)
        } else {
            (StreamId::MIN, StreamId::MIN, length)
        };
        let Some(mut s) = Stream::from_parts(nodes, length, last_id, first_id, max_deleted, added)
        else {
            return bad("stream nodes inconsistent with its counts");
        };
        if !v2 {
            // The first live entry (Redis's `streamGetEdgeID(s, 1, 1, ...)`).
            s.first_id = if s.is_empty() {
                StreamId::MIN
            } else {
                s.edge_id(true, false)
            };
        }
        let groups = self.count(3)?;
        for _ in 0..groups {
            let name = self.string()?.into_boxed_slice();
            let last_id = self.id()?;
            let entries_read = if v2 {
                self.length()? as i64
            } else {
                s.estimate_distance(last_id)
            };
            let mut g = Group {
                last_id,
                entries_read,
                ..Group::default()
            };
            for _ in 0..self.count(17)? {
                let id = self.raw_id()?;
                let delivery_time = self.millis()?;
                let delivery_count = self.length()?;
                let nack = Nack {
                    consumer: Box::default(),
                    delivery_time,
                    delivery_count,
                };
                if g.pel.insert(id, nack).is_some() {
                    return bad("duplicated stream PEL entry");
                }
            }
            let mut owned = std::collections::BTreeSet::new();
            for _ in 0..self.count(10)? {
                let cname = self.string()?.into_boxed_slice();
                let seen_time = self.millis()?;
                let active_time = if ty == TYPE_STREAM_LISTPACKS_3 {
                    self.millis()? as i64
                } else {
                    seen_time as i64
                };
                let mut c = Consumer {
                    seen_time,
                    active_time,
                    pel: Default::default(),
                };
                for _ in 0..self.count(16)? {
                    let id = self.raw_id()?;
                    match g.pel.get_mut(&id) {
                        Some(nack) if owned.insert(id) && c.pel.insert(id) => {
                            nack.consumer = cname.clone();
                        }
                        _ => return bad("stream consumer PEL entry not in its group's"),
                    }
                }
                if g.consumers.insert(cname, c).is_some() {
                    return bad("duplicated stream consumer");
                }
            }
            if owned.len() != g.pel.len() {
                return bad("stream group PEL entry without a consumer");
            }
            if s.groups.insert(name, g).is_some() {
                return bad("duplicated stream consumer group");
            }
        }
        Ok(s)
    }

    fn quicklist(&mut self, limits: Limits) -> Result<Value> {
        let nodes = self.count(2)?;
        let mut items = Vec::new();
        for _ in 0..nodes {
            match self.length()? {
                QUICKLIST_PLAIN => items.push(self.string()?),
                QUICKLIST_PACKED => {
                    let node = listpack_items(self.string()?)?;
                    if node.is_empty() {
                        return bad("empty quicklist node");
                    }
                    items.extend(node);
                }
                _ => return bad("unknown quicklist container"),
            }
        }
        if items.is_empty() {
            return bad("empty list");
        }
        Ok(Value::List(List::from_items(limits.list, &items)))
    }
}

/// The entries of a listpack blob, checked whole.
fn listpack_items(blob: Vec<u8>) -> Result<Vec<Vec<u8>>> {
    let Some(lp) = <Listpack>::from_blob(blob.into_boxed_slice()) else {
        return bad("bad listpack");
    };
    Ok(lp.iter().map(|e| e.to_vec()).collect())
}

fn set_of(limits: Limits, members: Vec<Vec<u8>>) -> Result<Value> {
    if members.is_empty() {
        return bad("empty set");
    }
    let set = Set::from_members(limits.set, members.iter().map(Vec::as_slice));
    if set.len() != members.len() {
        return bad("duplicate set members");
    }
    Ok(Value::Set(set))
}

fn zset_of(limits: Limits, mut items: Vec<(Vec<u8>, f64)>) -> Result<Value> {
    if items.is_empty() {
        return bad("empty sorted set");
    }
    if items.iter().any(|(_, s)| s.is_nan()) {
        return bad("NaN score");
    }
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut names: Vec<&[u8]> = items.iter().map(|(m, _)| m.as_slice()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return bad("duplicate sorted set members");
    }
    let refs: Vec<(&[u8], f64)> = items.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
    Ok(Value::ZSet(ZSet::from_sorted(limits.zset, &refs)))
}

type Field = (Vec<u8>, Vec<u8>, Option<u64>);

fn hash_of(limits: Limits, fields: Vec<Field>, now_ms: u64) -> Result<Value> {
    if fields.is_empty() {
        return bad("empty hash");
    }
    let mut h = Hash::default();
    let mut added = 0;
    for (f, v, at) in &fields {
        if at.is_some_and(|at| at <= now_ms) {
            // Expired already: left out, as Redis loads it.
            added += 1;
            continue;
        }
        if !h.set(limits.hash, f, v) {
            return bad("duplicate hash fields");
        }
        added += 1;
        if let Some(at) = at {
            h.set_field_deadline(f, Some(*at));
        }
    }
    if added != fields.len() || h.is_empty() {
        return bad("empty hash");
    }
    Ok(Value::Hash(h))
}

/// Checks a DUMP payload's footer (version at most [`VERSION_MAX`], CRC-64) and reads its
/// value.
pub fn restore(payload: &[u8], limits: Limits, now_ms: u64) -> Result<Value> {
    let n = payload.len();
    if n < 10 {
        return Err(RdbError::Footer);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if version > VERSION_MAX {
        return Err(RdbError::Footer);
    }
    let crc = u64::from_le_bytes(payload[n - 8..].try_into().unwrap_or_default());
    if crc != crc64(&payload[..n - 8]) {
        return Err(RdbError::Footer);
    }
    let mut r = Reader::new(&payload[..n - 10]);
    let ty = r.byte()?;
    r.value(ty, limits, now_ms)
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

const OP_FUNCTION2: u8 = 245;
const OP_FUNCTION_PRE_GA: u8 = 246;
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;
const OP_SLOT_INFO: u8 = 244;

/// A function library's record (Redis's `RDB_OPCODE_FUNCTION2` and the library's code, its
/// shebang line included), as an RDB file holds it before its databases.
pub fn function_record(out: &mut Vec<u8>, code: &[u8]) {
    let mut w = Writer {
        out: std::mem::take(out),
        ..Writer::new()
    };
    w.out.push(OP_FUNCTION2);
    w.string(code);
    *out = w.out;
}

/// FUNCTION DUMP's payload: a [`function_record`] per library, then the RDB version and the
/// CRC-64 as a DUMP payload ends.
pub fn functions_dump<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        function_record(&mut out, code);
    }
    out.extend_from_slice(&VERSION_BASE.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The libraries' code in a FUNCTION DUMP payload, or FUNCTION RESTORE's error text (without
/// `ERR`) for a payload it refuses.
pub fn functions_restore(payload: &[u8]) -> std::result::Result<Vec<Vec<u8>>, &'static str> {
    let n = payload.len();
    let footer_ok = n >= 10
        && u16::from_le_bytes([payload[n - 10], payload[n - 9]]) <= VERSION_MAX
        && u64::from_le_bytes(payload[n - 8..].try_into().unwrap_or_default())
            == crc64(&payload[..n - 8]);
    if !footer_ok {
        return Err("DUMP payload version or checksum are wrong");
    }
    let mut r = Reader::new(&payload[..n - 10]);
    let mut codes = Vec::new();
    while r.pos < r.buf.len() {
        match r.byte() {
            Ok(OP_FUNCTION2) => {}
            Ok(OP_FUNCTION_PRE_GA) => return Err("Pre-GA function format not supported"),
            Ok(_) => return Err("given type is not a function"),
            Err(_) => return Err("can not read data type"),
        }
        codes.push(r.string().map_err(|_| "Failed loading library payload")?);
    }
    Ok(codes)
}

/// One key's record of an RDB file: its deadline (if any), type, name and value. Returns the
/// RDB version the value needs.
pub fn key_record<'a>(
    w: &mut Writer,
    key: &[u8],
    v: impl Into<Stored<'a>>,
    deadline_ms: Option<u64>,
) -> u16 {
    if let Some(ms) = deadline_ms {
        w.out.push(OP_EXPIRETIME_MS);
        w.millis(ms);
    }
    // The type byte comes first: write the value to a scratch writer, then the key between.
    let mut body = Writer {
        out: Vec::new(),
        compress: w.compress,
        list_limits: w.list_limits,
    };
    let version = body.value(v);
    w.out.push(body.out[0]);
    w.string(key);
    w.out.extend_from_slice(&body.out[1..]);
    version
}

/// One database's part of a file: its keys' records, made by one or more shards.
#[derive(Debug, Default)]
pub struct DbPart {
    /// Keys in the records.
    pub keys: u64,
    /// Keys with a deadline.
    pub expires: u64,
    /// [`key_record`]s, back to back.
    pub records: Vec<u8>,
    /// The highest RDB version a record needs.
    pub version: u16,
}

/// A whole RDB file: the header with Redis's aux fields, each non-empty database (`parts[i]`
/// for database i: SELECTDB, RESIZEDB, records), EOF and the CRC-64 of everything before it.
/// `aux` is (name, value) pairs written after `redis-ver`.
pub fn file(parts: &[DbPart], aux: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let version = parts
        .iter()
        .map(|p| p.version)
        .max()
        .unwrap_or(VERSION_BASE)
        .max(VERSION_BASE);
    let mut w = Writer {
        out: file_header(version, aux),
        ..Writer::new()
    };
    for (db, p) in parts.iter().enumerate() {
        if p.keys == 0 {
            continue;
        }
        select_db(&mut w.out, db);
        w.out.push(OP_RESIZEDB);
        w.length(p.keys);
        w.length(p.expires);
        w.out.extend_from_slice(&p.records);
    }
    let mut digest = CRC64.digest();
    digest.update(&w.out);
    w.out.extend_from_slice(&file_end(digest));
    w.out
}

/// The start of a file of `version`: the magic and Redis's aux fields, `redis-ver` first, then
/// `aux`'s (name, value) pairs. Records follow, each run of them after a [`select_db`].
pub fn file_header(version: u16, aux: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.out
        .extend_from_slice(format!("REDIS{version:04}").as_bytes());
    let field = |w: &mut Writer, k: &str, v: &[u8]| {
        w.out.push(OP_AUX);
        w.string(k.as_bytes());
        w.string(v);
    };
    field(&mut w, "redis-ver", crate::REDIS_VERSION.as_bytes());
    for (k, v) in aux {
        field(&mut w, k, v);
    }
    w.out
}

/// Appends a SELECTDB opcode: the records after it belong to database `db`. A file may select
/// a database any number of times (a snapshot of several shards interleaves their records).
pub fn select_db(out: &mut Vec<u8>, db: usize) {
    let mut w = Writer {
        out: std::mem::take(out),
        ..Writer::new()
    };
    w.out.push(OP_SELECTDB);
    w.length(db as u64);
    *out = w.out;
}

/// Appends a SELECTDB of `db` and a RESIZEDB with its counts of keys and of keys with a
/// deadline: hints a loader sizes its tables from (a snapshot writes them at its start).
pub fn resize_hint(out: &mut Vec<u8>, db: usize, keys: u64, expires: u64) {
    select_db(out, db);
    let mut w = Writer {
        out: std::mem::take(out),
        ..Writer::new()
    };
    w.out.push(OP_RESIZEDB);
    w.length(keys);
    w.length(expires);
    *out = w.out;
}

/// A running CRC-64 of a file being written: feed it every byte before [`file_end`].
pub fn file_digest() -> FileDigest {
    CRC64.digest()
}

/// The end of a file: EOF and the checksum of every byte before it (`digest` fed with all of
/// them; the EOF byte is added here).
pub fn file_end(mut digest: FileDigest) -> [u8; 9] {
    digest.update(&[OP_EOF]);
    let mut end = [OP_EOF; 9];
    end[1..].copy_from_slice(&digest.finalize().to_le_bytes());
    end
}

/// Why a file could not be loaded: what, and at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// Byte offset in the file.
    pub offset: usize,
    /// The problem.
    pub what: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for FileError {}

/// One key read from a file.
#[derive(Debug)]
pub struct LoadedKey {
    /// Its database.
    pub db: usize,
    /// Its name.
    pub key: Vec<u8>,
    /// Its value.
    pub value: Value,
    /// Its deadline, Unix ms.
    pub deadline_ms: Option<u64>,
}

/// What a load found beside the keys.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// The file's RDB version.
    pub version: u16,
    /// Keys handed to the caller.
    pub loaded: u64,
    /// Keys skipped because their deadline had passed.
    pub expired: u64,
    /// The code of each function library the file holds, in its order.
    pub functions: Vec<Vec<u8>>,
}

/// Reads a whole RDB file (versions 1 to [`VERSION_MAX`]), checking its CRC-64 first (unless
/// the file says it has none), and hands each live key to `each` as it is read. A file that
/// turns out damaged past its checksum (or without one) ends in an error after some keys were
/// handed over: the caller serves nothing of a load that did not return `Ok` (a server
/// collects the keys, then starts). Databases at or past `databases` are refused.
pub fn load_file(
    bytes: &[u8],
    limits: Limits,
    now_ms: u64,
    databases: usize,
    mut each: impl FnMut(LoadedKey),
) -> std::result::Result<LoadStats, FileError> {
    let fail = |offset: usize, what: &str| FileError {
        offset,
        what: what.to_string(),
    };
    if bytes.len() < 9 || &bytes[..5] != b"REDIS" {
        return Err(fail(0, "not an RDB file (no REDIS signature)"));
    }
    let version = std::str::from_utf8(&bytes[5..9])
        .ok()
        .and_then(|v| v.parse::<u16>().ok())
        .ok_or_else(|| fail(5, "bad RDB version field"))?;
    if version == 0 || version > VERSION_MAX {
        return Err(fail(5, &format!("RDB version {version} is not supported")));
    }
    // From version 5 on, 8 bytes of CRC-64 follow EOF (all zero: not computed).
    let body_end = if version >= 5 {
        let n = bytes.len();
        if n < 9 + 1 + 8 {
            return Err(fail(n, "truncated file (no EOF and checksum)"));
        }
        let want = u64::from_le_bytes(bytes[n - 8..].try_into().unwrap_or_default());
        if want != 0 && want != crc64(&bytes[..n - 8]) {
            return Err(fail(n - 8, "wrong RDB checksum"));
        }
        n - 8
    } else {
        bytes.len()
    };
    let mut r = Reader::new(&bytes[..body_end]);
    r.pos = 9;
    let mut stats = LoadStats {
        version,
        ..LoadStats::default()
    };
    let mut db = 0usize;
    let mut deadline: Option<u64> = None;
    let at = |r: &Reader<'_>, e: RdbError| match e {
        RdbError::BadData(why) => fail(r.pos, why),
        RdbError::Footer => fail(r.pos, "bad value"),
    };
    loop {
        let start = r.pos;
        let op = r
            .byte()
            .map_err(|_| fail(start, "truncated file (no EOF)"))?;
        match op {
            OP_EOF => break,
            OP_SELECTDB => {
                let n = r.length().map_err(|e| at(&r, e))?;
                if n >= databases as u64 {
                    return Err(fail(start, &format!("database {n} is out of range")));
                }
                db = n as usize;
            }
            OP_RESIZEDB => {
                r.length().map_err(|e| at(&r, e))?;
                r.length().map_err(|e| at(&r, e))?;
            }
            OP_AUX => {
                r.string().map_err(|e| at(&r, e))?;
                r.string().map_err(|e| at(&r, e))?;
            }
            OP_EXPIRETIME_MS => {
                let b = r.take(8).map_err(|e| at(&r, e))?;
                deadline = Some(u64::from_le_bytes(b.try_into().unwrap_or_default()));
            }
            OP_EXPIRETIME => {
                let b = r.take(4).map_err(|e| at(&r, e))?;
                let secs = u32::from_le_bytes(b.try_into().unwrap_or_default());
                deadline = Some(u64::from(secs) * 1000);
            }
            OP_FREQ => {
                r.byte().map_err(|e| at(&r, e))?;
            }
            OP_IDLE => {
                r.length().map_err(|e| at(&r, e))?;
            }
            OP_SLOT_INFO => {
                for _ in 0..3 {
                    r.length().map_err(|e| at(&r, e))?;
                }
            }
            OP_MODULE_AUX => return Err(fail(start, "module data is not supported")),
            OP_FUNCTION2 => {
                let code = r.string().map_err(|e| at(&r, e))?;
                stats.functions.push(code);
            }
            OP_FUNCTION_PRE_GA => return Err(fail(start, "Pre-GA function format not supported")),
            ty => {
                let key = r.string().map_err(|e| at(&r, e))?;
                let value = r.value(ty, limits, now_ms).map_err(|e| match e {
                    RdbError::BadData("unsupported value type") => {
                        fail(start, &format!("value type {ty} is not supported"))
                    }
                    e => at(&r, e),
                })?;
                match deadline.take() {
                    Some(ms) if ms <= now_ms => stats.expired += 1,
                    d => {
                        stats.loaded += 1;
                        each(LoadedKey {
                            db,
                            key,
                            value,
                            deadline_ms: d,
                        });
                    }
                }
            }
        }
    }
    if r.pos != body_end {
        return Err(fail(r.pos, "data after EOF"));
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_and_refuse_damage() {
        let mut parts = vec![DbPart::default(), DbPart::default(), DbPart::default()];
        let mut w = Writer::new();
        parts[0].version = key_record(&mut w, b"a", &Value::from_bytes(b"1"), None);
        key_record(&mut w, b"b", &Value::from_bytes(&[b'x'; 100]), Some(5_000));
        key_record(&mut w, b"gone", &Value::from_bytes(b"v"), Some(10));
        parts[0].records = w.out;
        (parts[0].keys, parts[0].expires) = (3, 2);
        let mut w = Writer::new();
        parts[2].version = key_record(&mut w, b"c", &Value::from_bytes(b"3"), None);
        parts[2].records = w.out;
        parts[2].keys = 1;
        let bytes = file(&parts, &[("redis-bits", b"64".to_vec())]);
        assert_eq!(&bytes[..9], b"REDIS0010");
        let mut got = Vec::new();
        let stats = load_file(&bytes, Limits::default(), 1000, 16, |k| got.push(k)).unwrap();
        assert_eq!((stats.version, stats.loaded, stats.expired), (10, 3, 1));
        let names: Vec<(usize, &[u8], Option<u64>)> = got
            .iter()
            .map(|k| (k.db, &k.key[..], k.deadline_ms))
            .collect();
        assert_eq!(
            names,
            [(0, &b"a"[..], None), (0, b"b", Some(5000)), (2, b"c", None)]
        );
        assert_eq!(got[1].value, Value::from_bytes(&[b'x'; 100]));
        // A flipped byte, a cut file: refused by the checksum, nothing handed over.
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        let e = load_file(&bad, Limits::default(), 0, 16, |_| panic!("no key")).unwrap_err();
        assert_eq!(e.what, "wrong RDB checksum");
        let cut = &bytes[..bytes.len() - 12];
        assert!(load_file(cut, Limits::default(), 0, 16, |_| panic!("no key")).is_err());
        // A database out of range: refused when it is met (the keys before it were handed
        // over; the caller drops them with the error).
        let mut before = 0;
        let e = load_file(&bytes, Limits::default(), 0, 2, |_| before += 1).unwrap_err();
        assert!(e.what.contains("database 2"), "{e}");
        // (At time 0 nothing in database 0 has expired: its three keys.)
        assert_eq!(before, 3);
        // Without a checksum (all zeros), the data alone is checked.
        let mut unchecked = bytes.clone();
        let n = unchecked.len();
        unchecked[n - 8..].fill(0);
        assert!(load_file(&unchecked, Limits::default(), 0, 16, |_| {}).is_ok());
    }

    fn round_trip(v: &Value) -> Value {
        restore(&dump(v, Default::default()), Limits::default(), 0).unwrap()
    }

    #[test]
    fn lengths_in_every_width() {
        for n in [
            0u64,
            63,
            64,
            16383,
            16384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
        ] {
            let mut w = Writer::new();
            w.length(n);
            assert_eq!(Reader::new(&w.out).length().unwrap(), n);
        }
    }

    #[test]
    fn strings_as_redis_encodes_them() {
        let enc = |s: &[u8]| {
            let mut w = Writer::new();
            w.string(s);
            w.out
        };
        assert_eq!(enc(b"12"), [0xC0, 12]);
        assert_eq!(enc(b"-300"), [0xC1, 0xD4, 0xFE]);
        assert_eq!(enc(b"100000"), [0xC2, 0xA0, 0x86, 0x01, 0x00]);
        // Not canonical, or too long for the integer forms: bytes.
        assert_eq!(enc(b"012"), [3, b'0', b'1', b'2']);
        assert_eq!(
            enc(b"12345678901"),
            [11, b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'8', b'9', b'0', b'1']
        );
        let long = vec![b'a'; 100];
        let packed = enc(&long);
        assert_eq!(packed[0], 0xC3);
        assert!(packed.len() < 20);
        assert_eq!(Reader::new(&packed).string().unwrap(), long);
    }

    #[test]
    fn a_redis_dump_of_a_string_reads_back() {
        // DUMP of "hello" from redis-server 7.0.15.
        let payload = b"\x00\x05hello\x0a\x00\x63\x72\xdf\x76\x65\x34\x20\x0a";
        assert_eq!(
            restore(payload, Limits::default(), 0).unwrap(),
            Value::from_bytes(b"hello")
        );
        assert_eq!(
            dump(&Value::from_bytes(b"hello"), Default::default()),
            payload
        );
    }

    #[test]
    fn every_type_round_trips() {
        let l = Limits::default();
        let values = [
            Value::from_bytes(b"x"),
            Value::from_bytes(&vec![b'z'; 5000]),
            Value::Int(i64::MIN),
            Value::List(List::from_items(
                l.list,
                &(0..2000)
                    .map(|i| format!("e{i}").into_bytes())
                    .collect::<Vec<_>>(),
            )),
            Value::Set(Set::from_members(l.set, [&b"1"[..], b"2", b"3"])),
            Value::Set(Set::from_members(l.set, [&b"a"[..], b"b"])),
            Value::Set(Set::from_members(
                l.set,
                (0..1000)
                    .map(|i| format!("m{i}").into_bytes())
                    .collect::<Vec<_>>()
                    .iter()
                    .map(Vec::as_slice),
            )),
        ];
        for v in &values {
            assert_eq!(&round_trip(v), v);
        }
        let big: Vec<(Vec<u8>, f64)> = (0..300)
            .map(|i| (format!("m{i}").into_bytes(), f64::from(i) / 3.0))
            .collect();
        let z = zset_of(l, big).unwrap();
        assert_eq!(round_trip(&z), z);
        let mut h = Hash::default();
        for i in 0..600 {
            h.set(l.hash, format!("f{i}").as_bytes(), b"v");
        }
        h.set_field_deadline(b"f3", Some(5_000_000_000_000));
        let hv = Value::Hash(h);
        let back = round_trip(&hv);
        let Value::Hash(hb) = &back else { panic!() };
        assert_eq!(hb.len(), 600);
        assert_eq!(hb.field_deadline(b"f3"), Some(Some(5_000_000_000_000)));
        let p = dump(&hv, Default::default());
        assert_eq!(p[p.len() - 10], 12);
    }

    #[test]
    fn damaged_payloads_are_refused_without_panic() {
        let good = dump(
            &Value::List(List::from_items(
                Default::default(),
                &[b"a".to_vec(), b"bb".to_vec()],
            )),
            Default::default(),
        );
        // Any truncation or single-byte change: an error, never a panic.
        for cut in 0..good.len() {
            assert!(restore(&good[..cut], Limits::default(), 0).is_err());
        }
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                assert!(restore(&bad, Limits::default(), 0).is_err());
            }
        }
        // A body with a valid footer but nonsense inside, lengths near u64::MAX.
        for body in [
            &b"\x12\x81\xff\xff\xff\xff\xff\xff\xff\xff"[..],
            b"\x00\xc3\x81\xff\xff\xff\xff\xff\xff\xff\xff\x05",
            b"\x02\x00",
            b"\x63",
        ] {
            let mut p = body.to_vec();
            p.extend_from_slice(&10u16.to_le_bytes());
            let crc = crc64(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            assert!(matches!(
                restore(&p, Limits::default(), 0),
                Err(RdbError::BadData(_))
            ));
        }
    }
}
