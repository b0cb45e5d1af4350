//! The checks of the `lzf` fuzz target, shared with the corpus replay: `kvcore::lzf` on any
//! bytes (the first byte sets how far below the input's length the limit is).

use kvcore::lzf::Compressor;

/// Under any limit the result fits it, decompresses to the input, and is the bytes a fresh
/// compressor gives; a reused compressor carries nothing from one input to the next.
pub fn check(data: &[u8]) {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let mut reused = Compressor::default();
    for part in [&input[..input.len() / 2], input, &input[..input.len() / 3]] {
        let fresh = Compressor::default().compress(part, part.len() + 64, <[u8]>::to_vec);
        match &fresh {
            Some(packed) => assert_eq!(lzf::decompress(packed, part.len()).unwrap(), part),
            None => assert!(
                part.is_empty(),
                "{} bytes did not fit their bound",
                part.len()
            ),
        }
        let limit = part.len().saturating_sub(usize::from(cut));
        if let Some(tight) = reused.compress(part, limit, <[u8]>::to_vec) {
            assert!(tight.len() <= limit);
            assert_eq!(Some(tight), fresh);
        }
    }
}
