//! Where a robots.txt line's key and value end, found 64 octets at a time.
//!
//! The parser asks three questions as it walks a body forwards: where does the key that starts
//! here end (the first `:`, `#`, CR or LF), where does the value that starts here end (the
//! first `#`, CR or LF) and what does it hold (a `*`; a `%` or an octet outside ASCII, which
//! canonical form may change), and where does the next line start. [`Scan`] answers all three
//! from bit masks of one 64-octet block of the body: one bit per octet for each class of
//! octet, computed with 16-octet vector compares (`wide`, which uses SSE2 on x86-64, NEON on
//! `AArch64` and plain code elsewhere; no `unsafe` here). The parser only moves forwards, so
//! each block's masks are computed once, and finding the end of a key or a value is a shift
//! and a count of trailing zeros instead of a loop over its octets.

use wide::u8x16;

/// The octets of one block.
const BLOCK: usize = 64;

/// One bit per octet of a block (bit `k` for the block's octet `k`), for each class.
#[derive(Debug, Clone, Copy, Default)]
struct Masks {
    /// CR or LF: a line ends.
    eol: u64,
    /// `#`: a comment starts.
    hash: u64,
    /// `:`: a key ends.
    colon: u64,
    /// `*`: a pattern has a wildcard.
    star: u64,
    /// `%` or an octet outside ASCII: canonical form may change the pattern.
    odd: u64,
}

impl Masks {
    /// Computes the masks of `block` (past the body's end, zeros: in no class).
    fn of(block: &[u8; BLOCK]) -> Masks {
        let splat = |c: u8| u8x16::splat(c);
        let (cr, lf, hash, colon, star, percent) =
            (splat(b'\r'), splat(b'\n'), splat(b'#'), splat(b':'), splat(b'*'), splat(b'%'));
        let mut m = Masks::default();
        for (k, lane) in block.chunks_exact(16).enumerate() {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(lane);
            let v = u8x16::new(octets);
            let bits = |x: u8x16| u64::from(x.to_bitmask()) << (16 * k);
            m.eol |= bits(v.simd_eq(cr) | v.simd_eq(lf));
            m.hash |= bits(v.simd_eq(hash));
            m.colon |= bits(v.simd_eq(colon));
            m.star |= bits(v.simd_eq(star));
            // `to_bitmask` takes each octet's top bit: set for octets outside ASCII.
            m.odd |= bits(v.simd_eq(percent) | v);
        }
        m
    }
}

/// A forward scan over one body; see the module's doc.
#[derive(Debug)]
pub(crate) struct Scan<'b> {
    body: &'b [u8],
    /// Where the block whose masks are held starts (a multiple of [`BLOCK`]).
    start: usize,
    masks: Masks,
}

/// Where a value ends, and what it holds: see [`Scan::value_end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValueEnd {
    /// The position of the first `#`, CR or LF at or after the value's start, or the body's
    /// end.
    pub end: usize,
    /// The value holds a `%` or an octet outside ASCII, which a pattern's canonical form
    /// may change.
    pub changes: bool,
    /// The value holds a `*`.
    pub star: bool,
}

impl<'b> Scan<'b> {
    /// A scan of `body`, at its start.
    pub fn new(body: &'b [u8]) -> Scan<'b> {
        let mut scan = Scan { body, start: 0, masks: Masks::default() };
        scan.load(0);
        scan
    }

    /// Holds the masks of the block that starts at `start`.
    fn load(&mut self, start: usize) {
        self.start = start;
        let rest = self.body.get(start..).unwrap_or_default();
        self.masks = if let Some(block) = rest.first_chunk::<BLOCK>() {
            Masks::of(block)
        } else {
            // The last, short block, padded with zeros.
            let mut block = [0u8; BLOCK];
            block[..rest.len()].copy_from_slice(rest);
            Masks::of(&block)
        };
    }

    /// Returns the position of the first octet at or after `i` in the classes `pick` selects,
    /// or the body's end; `seen` is called with the masks of every block passed on the way,
    /// each limited to the octets from `i` up to (not including) the one found.
    fn find(&mut self, i: usize, pick: impl Fn(&Masks) -> u64, mut seen: impl FnMut(&Masks, u64)) -> usize {
        let n = self.body.len();
        if i >= n {
            return n;
        }
        if i < self.start || i >= self.start + BLOCK {
            self.load(i - i % BLOCK);
        }
        // The octets of the held block from `i` on.
        let mut from = !0u64 << (i - self.start);
        loop {
            let stops = pick(&self.masks) & from;
            if stops != 0 {
                // The octets before the first stop.
                let before = from & ((stops & stops.wrapping_neg()) - 1);
                seen(&self.masks, before);
                return (self.start + stops.trailing_zeros() as usize).min(n);
            }
            seen(&self.masks, from);
            let next = self.start + BLOCK;
            if next >= n {
                return n;
            }
            self.load(next);
            from = !0;
        }
    }

    /// Returns the position of the first `:`, `#`, CR or LF at or after `i`, or the body's
    /// end: where a key ends.
    pub fn key_end(&mut self, i: usize) -> usize {
        self.find(i, |m| m.colon | m.hash | m.eol, |_, _| {})
    }

    /// Returns where the value that starts at `i` ends, and what it holds.
    pub fn value_end(&mut self, i: usize) -> ValueEnd {
        let (mut changes, mut star) = (false, false);
        let end = self.find(
            i,
            |m| m.hash | m.eol,
            |m, within| {
                changes |= m.odd & within != 0;
                star |= m.star & within != 0;
            },
        );
        ValueEnd { end, changes, star }
    }

    /// Returns where the line after the one that holds position `i` starts: past its CR, LF
    /// or CRLF, or the body's end.
    pub fn next_line(&mut self, i: usize) -> usize {
        let body = self.body;
        // Most lines are read up to their end: no search then.
        let end = if matches!(body.get(i), Some(b'\r' | b'\n')) { i } else { self.find(i, |m| m.eol, |_, _| {}) };
        match body.get(end) {
            Some(b'\r') if body.get(end + 1) == Some(&b'\n') => end + 2,
            Some(_) => end + 1,
            None => body.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// 64 octets at a time finds the same ends as one at a time, wherever the stops and the
        /// octets that canonical form changes fall in a block, and however far the scan jumps.
        #[test]
        fn block_scans_are_octet_scans(
            body in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => proptest::sample::select(b"abz/-_*$ \t".to_vec()),
                    1 => proptest::sample::select(b":#\r\n%\x80\xFF\x7F\x00".to_vec()),
                ],
                0..300),
            starts in proptest::collection::vec(0usize..300, 1..6),
        ) {
            let mut starts = starts;
            starts.sort_unstable();
            let mut scan = Scan::new(&body);
            for from in starts {
                let from = from.min(body.len());
                let rest = &body[from..];
                let key = rest.iter().position(|b| matches!(b, b':' | b'#' | b'\n' | b'\r')).map_or(body.len(), |j| from + j);
                proptest::prop_assert_eq!(scan.key_end(from), key);
                let end = rest.iter().position(|b| matches!(b, b'#' | b'\n' | b'\r')).map_or(body.len(), |j| from + j);
                let changes = body[from..end].iter().any(|&b| b == b'%' || !b.is_ascii());
                let star = body[from..end].contains(&b'*');
                proptest::prop_assert_eq!(scan.value_end(from), ValueEnd { end, changes, star });
                let eol = rest.iter().position(|b| matches!(b, b'\n' | b'\r')).map_or(body.len(), |j| from + j);
                let next = match (body.get(eol), body.get(eol + 1)) {
                    (Some(b'\r'), Some(b'\n')) => eol + 2,
                    (Some(_), _) => eol + 1,
                    (None, _) => body.len(),
                };
                proptest::prop_assert_eq!(scan.next_line(from), next);
            }
        }
    }

    #[test]
    fn a_scan_stops_at_the_body_end_in_a_padded_block() {
        let body = b"disallow: /a*%";
        let mut scan = Scan::new(body);
        assert_eq!(scan.key_end(0), 8);
        assert_eq!(scan.value_end(9), ValueEnd { end: body.len(), changes: true, star: true });
        assert_eq!(scan.next_line(9), body.len());
        assert_eq!(scan.key_end(body.len()), body.len());
    }
}
