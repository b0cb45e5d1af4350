//! Operation errors and their exact Redis reply texts.
//!
//! Every kvcore operation returns `Result<T, OpError>`. The RESP text of each error lives in
//! [`OpError::message`] and nowhere else, because clients match on these strings.

use std::fmt;

/// Why an operation failed. Small, `Copy`, no allocation on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpError {
    /// The key holds a value of another type.
    WrongType,
    /// An argument or stored value is not a 64-bit integer.
    NotInteger,
    /// An argument or stored value is not a valid float.
    NotFloat,
    /// Generic syntax error in the options.
    Syntax,
    /// INCR/DECR would overflow a signed 64-bit integer.
    Overflow,
    /// INCRBYFLOAT would produce NaN or infinity.
    NanOrInfinity,
    /// RENAME and friends on a missing key.
    NoSuchKey,
    /// SELECT / MOVE / COPY DB index outside 0..16.
    DbIndexOutOfRange,
    /// MOVE / COPY to the same database.
    SameObject,
    /// SETRANGE / GETRANGE offset out of range.
    OffsetOutOfRange,
    /// A string would exceed proto-max-bulk-len.
    StringTooLong,
    /// SCAN cursor is not a number.
    InvalidCursor,
    /// EXPIRE flags NX/XX/GT/LT combined incompatibly.
    ExpireFlagsConflict,
    /// The `GT`, `LT` and `NX` options at the same time are not compatible (ZADD-style).
    GtLtNxConflict,
    /// An argument must be positive.
    NotPositive,
    /// Value out of range (generic).
    OutOfRange,
    /// An integer beyond a C `int` where Redis reads one (`getIntFromObjectOrReply`: the
    /// database indexes of SELECT, MOVE and COPY).
    NotInt32,
    /// HELLO with an unsupported protocol version.
    NoProto,
    /// The database ran out of its memory budget.
    OutOfMemory,
    /// A string value that is not a HyperLogLog given to a PF command.
    NotHll,
    /// A HyperLogLog whose registers cannot be decoded.
    CorruptHll,
}

impl OpError {
    /// The exact error line Redis sends, without the leading `-` and trailing CRLF.
    pub fn message(self) -> &'static str {
        match self {
            OpError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            }
            OpError::NotInteger => "ERR value is not an integer or out of range",
            OpError::NotFloat => "ERR value is not a valid float",
            OpError::Syntax => "ERR syntax error",
            OpError::Overflow => "ERR increment or decrement would overflow",
            OpError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
            OpError::NoSuchKey => "ERR no such key",
            OpError::DbIndexOutOfRange => "ERR DB index is out of range",
            OpError::SameObject => "ERR source and destination objects are the same",
            OpError::OffsetOutOfRange => "ERR offset is out of range",
            OpError::StringTooLong => {
                "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
            }
            OpError::InvalidCursor => "ERR invalid cursor",
            OpError::ExpireFlagsConflict => {
                "ERR NX and XX, GT or LT options at the same time are not compatible"
            }
            OpError::GtLtNxConflict => {
                "ERR GT, LT, and/or NX options at the same time are not compatible"
            }
            OpError::NotPositive => "ERR value is out of range, must be positive",
            OpError::OutOfRange => "ERR value is out of range",
            OpError::NotInt32 => {
                "ERR value is out of range, value must between -2147483648 and 2147483647"
            }
            OpError::NoProto => "NOPROTO unsupported protocol version",
            OpError::OutOfMemory => "OOM command not allowed when used memory > 'maxmemory'.",
            OpError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            OpError::CorruptHll => "INVALIDOBJ Corrupted HLL object detected",
        }
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for OpError {}

/// Result of a kvcore operation.
pub type OpResult<T> = Result<T, OpError>;
