//! LEB128 varints (7 bits a byte, low bits first), signed ones zigzag-encoded first (0, -1,
//! 1, -2, … → 0, 1, 2, 3, …): the integers of binary packed frames and trace files.

/// Append `n`.
pub(crate) fn put_u(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Append signed `n`, zigzagged.
pub(crate) fn put_i(out: &mut Vec<u8>, n: i64) {
    put_u(out, zigzag(n));
}

/// `n` zigzagged.
pub(crate) fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// The signed number `z` stands for.
pub(crate) fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// The bytes ended first.
    Truncated,
    /// More than 64 bits.
    TooLarge,
}

/// Read the varint at `b[*i..]`, advancing `*i` past it.
pub(crate) fn get_u(b: &[u8], i: &mut usize) -> Result<u64, Bad> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let v = *b.get(*i).ok_or(Bad::Truncated)?;
        *i += 1;
        let bits = u64::from(v & 0x7f);
        if shift == 63 && bits > 1 {
            return Err(Bad::TooLarge);
        }
        n |= bits << shift;
        if v & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(Bad::TooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_and_damage_is_named() {
        let mut out = Vec::new();
        let nums = [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        for n in nums {
            put_u(&mut out, n);
        }
        let mut i = 0;
        for n in nums {
            assert_eq!(get_u(&out, &mut i), Ok(n));
        }
        assert_eq!(i, out.len());
        for n in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(n)), n);
        }
        assert_eq!(get_u(&[0x80, 0x80], &mut 0), Err(Bad::Truncated));
        assert_eq!(get_u(&[0xff; 10], &mut 0), Err(Bad::TooLarge));
        assert_eq!(get_u(&[0xff; 11], &mut 0), Err(Bad::TooLarge));
    }
}
