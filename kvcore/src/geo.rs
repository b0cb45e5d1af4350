//! Geohash math for the geo commands, reproducing Redis's numbers exactly.
//!
//! A position is stored as a sorted-set score: a 52-bit geohash, latitude bits (over
//! -85.05112878..85.05112878, the Web Mercator limits) at even bit positions and longitude bits
//! (over -180..180) at odd ones, 26 bits each. Decoding yields the centre of the cell, so
//! positions come back slightly moved, exactly as Redis returns them.
//!
//! A radius or box search picks a cell size (`step`) from the radius so that the cell holding
//! the centre plus its 8 neighbours cover the search area, drops neighbours that lie wholly
//! outside the bounding box, and range-scans the sorted set over each remaining cell's score
//! range `[cell << shift, (cell + 1) << shift)`. Each candidate is then checked with the exact
//! distance (haversine on a sphere of radius [`EARTH_RADIUS_M`]). Cells are visited in Redis's
//! order (centre, N, S, E, W, NE, NW, SE, SW) so unsorted replies come out in Redis's order.

/// Earth radius Redis uses, in metres.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Valid longitudes.
pub const LONG_MIN: f64 = -180.0;
/// Valid longitudes.
pub const LONG_MAX: f64 = 180.0;
/// Valid latitudes (Web Mercator).
pub const LAT_MIN: f64 = -85.05112878;
/// Valid latitudes (Web Mercator).
pub const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate.
pub const STEP_MAX: u32 = 26;
const MERCATOR_MAX: f64 = 20037726.37;

/// A cell: interleaved bits at `step` bits per coordinate. `step == 0 && bits == 0` is "none".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cell {
    /// Interleaved bits.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u32,
}

/// A cell's bounds.
#[derive(Clone, Copy, Debug)]
pub struct Area {
    /// Longitude range.
    pub lon: (f64, f64),
    /// Latitude range.
    pub lat: (f64, f64),
}

/// Whether `(lon, lat)` can be stored.
pub fn valid(lon: f64, lat: f64) -> bool {
    (LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// Encodes over the given ranges; `None` outside them or outside the storable area.
pub fn encode_in(
    lon: f64,
    lat: f64,
    lon_r: (f64, f64),
    lat_r: (f64, f64),
    step: u32,
) -> Option<Cell> {
    if !valid(lon, lat) || lat < lat_r.0 || lat > lat_r.1 || lon < lon_r.0 || lon > lon_r.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.0) / (lat_r.1 - lat_r.0) * scale;
    let lon_off = (lon - lon_r.0) / (lon_r.1 - lon_r.0) * scale;
    // C's double -> uint32_t conversion truncates; offsets are within 0..=2^26.
    let bits = spread(lat_off as u32) | (spread(lon_off as u32) << 1);
    Some(Cell { bits, step })
}

/// Encodes a position with the storage ranges.
pub fn encode(lon: f64, lat: f64, step: u32) -> Option<Cell> {
    encode_in(lon, lat, (LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), step)
}

/// The score stored for a position.
pub fn score_of(lon: f64, lat: f64) -> Option<f64> {
    encode(lon, lat, STEP_MAX).map(|c| c.bits as f64)
}

/// The bounds of a cell over the given ranges.
pub fn decode_in(c: Cell, lon_r: (f64, f64), lat_r: (f64, f64)) -> Area {
    let ilat = squash(c.bits);
    let ilon = squash(c.bits >> 1);
    let div = (1u64 << c.step) as f64;
    let lat_scale = lat_r.1 - lat_r.0;
    let lon_scale = lon_r.1 - lon_r.0;
    Area {
        lat: (
            lat_r.0 + (f64::from(ilat) / div) * lat_scale,
            lat_r.0 + ((f64::from(ilat) + 1.0) / div) * lat_scale,
        ),
        lon: (
            lon_r.0 + (f64::from(ilon) / div) * lon_scale,
            lon_r.0 + ((f64::from(ilon) + 1.0) / div) * lon_scale,
        ),
    }
}

/// The bounds of a cell over the storage ranges.
pub fn decode(c: Cell) -> Area {
    decode_in(c, (LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX))
}

/// `(uint64_t)score` as Redis's x86-64 build computes it, for scores that are not geohashes
/// (a ZADD can store any score): below 2^63 a truncation to `i64` reinterpreted (so -3 becomes
/// 2^64-3), above it a truncation of `score - 2^63` with the top bit flipped; out-of-range and
/// NaN truncations give `i64::MIN` (the CPU's "integer indefinite").
fn c_double_to_u64(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let cvtt = |x: f64| -> i64 {
        if x.is_nan() || !(-TWO63..TWO63).contains(&x) {
            i64::MIN
        } else {
            x as i64
        }
    };
    if score < TWO63 {
        cvtt(score) as u64
    } else {
        (cvtt(score - TWO63) as u64) ^ (1 << 63)
    }
}

/// The position a stored score stands for: its cell's centre, clamped.
pub fn position(score: f64) -> (f64, f64) {
    let a = decode(Cell {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The standard 11-character base32 geohash of a stored score (GEOHASH).
pub fn hash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = position(score);
    let bits = encode_in(lon, lat, (-180.0, 180.0), (-90.0, 90.0), STEP_MAX).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, o) in out.iter_mut().enumerate().take(10) {
        *o = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn deg_rad(d: f64) -> f64 {
    d * (std::f64::consts::PI / 180.0)
}

fn rad_deg(r: f64) -> f64 {
    r / (std::f64::consts::PI / 180.0)
}

/// Distance in metres along the meridian between two latitudes.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in metres, computed as Redis does.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lat1r = deg_rad(lat1);
    let lon1r = deg_rad(lon1);
    let lat2r = deg_rad(lat2);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What to search: a circle or a box around a centre, sizes in metres.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// `BYRADIUS`: radius in metres.
    Radius(f64),
    /// `BYBOX`: width and height in metres.
    Box(f64, f64),
}

/// Whether the point `(lon, lat)` lies in `shape` around `(clon, clat)`; its distance if so.
pub fn within(shape: Shape, clon: f64, clat: f64, lon: f64, lat: f64) -> Option<f64> {
    match shape {
        Shape::Radius(r) => {
            // Most candidates of the covering cells lie north or south of the circle: the
            // great-circle distance is never below the meridian distance, so those are out
            // without the trigonometry. The margin keeps rounding from ever dropping a point
            // the full formula would keep.
            if lat_distance(lat, clat) > r * (1.0 + 1e-9) + 1e-6 {
                return None;
            }
            let d = distance(clon, clat, lon, lat);
            (d <= r).then_some(d)
        }
        Shape::Box(w, h) => {
            if lat_distance(lat, clat) > h / 2.0 {
                return None;
            }
            if distance(lon, lat, clon, lat) > w / 2.0 {
                return None;
            }
            Some(distance(clon, clat, lon, lat))
        }
    }
}

fn steps_for_radius(mut range: f64, lat: f64) -> u32 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u32
}

/// The neighbouring cell one step along an axis: `axis` masks that axis's interleaved bits
/// (odd bits: longitude, even bits: latitude); `d` > 0 moves up, otherwise down.
fn move_axis(c: Cell, d: i8, axis: u64) -> Cell {
    let other = !axis;
    let a = c.bits & axis;
    let o = c.bits & other;
    let zz = other >> (64 - c.step * 2);
    let a = if d > 0 {
        a.wrapping_add(zz + 1)
    } else {
        (a | zz).wrapping_sub(zz + 1)
    };
    Cell {
        bits: (a & (axis >> (64 - c.step * 2))) | o,
        step: c.step,
    }
}

fn move_x(c: Cell, d: i8) -> Cell {
    move_axis(c, d, 0xaaaa_aaaa_aaaa_aaaa)
}

fn move_y(c: Cell, d: i8) -> Cell {
    move_axis(c, d, 0x5555_5555_5555_5555)
}

/// The centre cell and its neighbours in Redis's order: centre, N, S, E, W, NE, NW, SE, SW.
fn neighbourhood(c: Cell) -> [Cell; 9] {
    [
        c,
        move_y(c, 1),
        move_y(c, -1),
        move_x(c, 1),
        move_x(c, -1),
        move_y(move_x(c, 1), 1),
        move_y(move_x(c, -1), 1),
        move_y(move_x(c, 1), -1),
        move_y(move_x(c, -1), -1),
    ]
}

/// The bounding box `(min_lon, min_lat, max_lon, max_lat)` of a shape around a centre.
fn bounding_box(shape: Shape, lon: f64, lat: f64) -> [f64; 4] {
    let (w, h) = match shape {
        Shape::Radius(r) => (r, r),
        Shape::Box(w, h) => (w / 2.0, h / 2.0),
    };
    let lat_delta = rad_deg(h / EARTH_RADIUS_M);
    let lon_delta_top = rad_deg(w / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
    let lon_delta_bottom = rad_deg(w / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
    let south = lat < 0.0;
    let d = if south {
        lon_delta_bottom
    } else {
        lon_delta_top
    };
    [lon - d, lat - lat_delta, lon + d, lat + lat_delta]
}

/// The score ranges `[min, max)` to scan for a search, in visiting order, duplicates of the
/// previous range skipped as Redis does.
pub fn search_ranges(shape: Shape, lon: f64, lat: f64) -> Vec<(f64, f64)> {
    let b = bounding_box(shape, lon, lat);
    let radius = match shape {
        Shape::Radius(r) => r,
        Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
    };
    let mut steps = steps_for_radius(radius, lat);
    let Some(mut centre) = encode(lon, lat, steps) else {
        return Vec::new();
    };
    let mut cells = neighbourhood(centre);
    let n = decode(cells[1]);
    let s = decode(cells[2]);
    let e = decode(cells[3]);
    let w = decode(cells[4]);
    let decrease = n.lat.1 < b[3] || s.lat.0 > b[1] || e.lon.1 < b[2] || w.lon.0 > b[0];
    if steps > 1 && decrease {
        steps -= 1;
        centre = encode(lon, lat, steps).unwrap_or(centre);
        cells = neighbourhood(centre);
    }
    let area = decode(centre);
    let none = Cell::default();
    if steps >= 2 {
        if area.lat.0 < b[1] {
            cells[2] = none;
            cells[8] = none;
            cells[7] = none;
        }
        if area.lat.1 > b[3] {
            cells[1] = none;
            cells[5] = none;
            cells[6] = none;
        }
        if area.lon.0 < b[0] {
            cells[4] = none;
            cells[8] = none;
            cells[6] = none;
        }
        if area.lon.1 > b[2] {
            cells[3] = none;
            cells[7] = none;
            cells[5] = none;
        }
    }
    let mut out = Vec::with_capacity(9);
    let mut last: usize = 0;
    for (i, c) in cells.iter().enumerate() {
        if *c == none {
            continue;
        }
        if last != 0 && cells[last] == *c {
            continue;
        }
        let shift = 52 - c.step * 2;
        out.push(((c.bits << shift) as f64, ((c.bits + 1) << shift) as f64));
        last = i;
    }
    out
}

/// A distance as Redis replies it: `d * 10^4` rounded half to even to an integer (so the
/// product's own rounding counts: 16044411.485749999 shows `16044411.4858`), printed with four
/// decimals.
pub fn distance_text(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_string();
    }
    let scaled = (d * 10_000.0).round_ties_even();
    if !scaled.is_finite() || scaled.abs() >= 9.2e18 {
        return fixed(d, 4, false);
    }
    let v = scaled as i64;
    let (sign, u) = if v < 0 {
        ("-", v.unsigned_abs())
    } else {
        ("", v as u64)
    };
    format!("{sign}{}.{:04}", u / 10_000, u % 10_000)
}

/// `v` printed like C's `"%.<decimals>f"` (exact value, rounded half to even), then with
/// trailing zeros and a trailing point removed when `trim` (Redis's "human" long doubles).
pub fn fixed(v: f64, decimals: u32, trim: bool) -> String {
    let neg = v.is_sign_negative();
    let a = v.abs();
    let p10 = 10u128.pow(decimals);
    let bits = a.to_bits();
    let biased = (bits >> 52) as i64;
    let frac = bits & ((1 << 52) - 1);
    let (m, e) = if biased == 0 {
        (u128::from(frac), -1074)
    } else {
        (u128::from(frac | 1 << 52), biased - 1075)
    };
    let scaled: u128 = if !a.is_finite() || e > 60 {
        return format!("{v:.*}", decimals as usize);
    } else if e >= 0 {
        (m << e) * p10
    } else {
        let k = (-e) as u32;
        let p = m * p10;
        if k >= 128 {
            0
        } else {
            let q = p >> k;
            let r = p - (q << k);
            let half = 1u128 << (k - 1);
            if r > half || (r == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        }
    };
    let int = scaled / p10;
    let fr = scaled % p10;
    let mut s = String::with_capacity(32);
    if neg && scaled != 0 {
        s.push('-');
    }
    s.push_str(itoa::Buffer::new().format(int));
    if decimals > 0 {
        let digits = format!("{fr:0width$}", width = decimals as usize);
        let digits = if trim {
            digits.trim_end_matches('0')
        } else {
            &digits
        };
        if !digits.is_empty() {
            s.push('.');
            s.push_str(digits);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_matches_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo": score 3479099956230698.
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698.0));
        let (lon, lat) = position(3479099956230698.0);
        assert_eq!(fixed(lon, 17, true), "13.36138933897018433");
        assert_eq!(fixed(lat, 17, true), "38.11555639549629859");
        assert_eq!(&hash_string(3479099956230698.0), b"sqc8b49rny0");
        let (lon2, lat2) = position(score_of(15.087269, 37.502669).unwrap());
        assert_eq!(
            fixed(distance(lon, lat, lon2, lat2), 4, false),
            "166274.1516"
        );
    }

    #[test]
    fn fixed_rounds_exactly() {
        assert_eq!(fixed(0.5, 0, false), "0");
        assert_eq!(fixed(1.5, 0, false), "2");
        assert_eq!(fixed(2.675, 2, false), "2.67");
        assert_eq!(fixed(-1.25, 1, false), "-1.2");
        assert_eq!(fixed(100.0, 17, true), "100");
        assert_eq!(fixed(0.0, 4, false), "0.0000");
    }
}
