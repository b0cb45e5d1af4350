//! Geo commands: positions stored as geohash scores in a sorted set (see [`crate::geo`]).
//!
//! GEOADD turns coordinates into scores and runs ZADD's code. The searches (GEOSEARCH,
//! GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and the `_RO` forms) share one parser and one
//! search: scan the covering cells' score ranges, keep points within the shape, then sort,
//! cut to COUNT and reply or store.

use super::strings::reply_err;
use super::zset::{get_z, limits, store};
use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::geo::{self, Shape};
use crate::resp::ReplyWriter;
use crate::zset::ZSet;
use crate::Db;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("geoadd", -5, WRITE | DENYOOM, 1, 1, 1, geoadd),
    cmd!("geopos", -2, READONLY, 1, 1, 1, geopos),
    cmd!("geodist", -4, READONLY, 1, 1, 1, geodist),
    cmd!("geohash", -2, READONLY, 1, 1, 1, geohash),
    cmd!("geosearch", -7, READONLY, 1, 1, 1, geosearch),
    cmd!(
        "geosearchstore",
        -8,
        WRITE | DENYOOM,
        1,
        2,
        1,
        geosearchstore
    ),
    cmd!(
        "georadius",
        -6,
        WRITE | DENYOOM | MOVABLE_KEYS,
        1,
        1,
        1,
        georadius
    ),
    cmd!("georadius_ro", -6, READONLY, 1, 1, 1, georadius_ro),
    cmd!(
        "georadiusbymember",
        -5,
        WRITE | DENYOOM | MOVABLE_KEYS,
        1,
        1,
        1,
        georadiusbymember
    ),
    cmd!(
        "georadiusbymember_ro",
        -5,
        READONLY,
        1,
        1,
        1,
        georadiusbymember_ro
    ),
];

/// One point found by a search.
#[derive(Clone, Debug, PartialEq)]
pub struct GeoHit {
    /// Member.
    pub member: Vec<u8>,
    /// Distance from the centre in metres.
    pub dist: f64,
    /// Stored score (52-bit geohash).
    pub score: f64,
    /// Longitude of the cell centre.
    pub lon: f64,
    /// Latitude of the cell centre.
    pub lat: f64,
}

/// Points of `z` within `shape` around `(lon, lat)` in Redis's visiting order; stops after
/// `limit` points when `limit > 0` (COUNT ... ANY).
pub fn search(z: &ZSet, shape: Shape, lon: f64, lat: f64, limit: usize) -> Vec<GeoHit> {
    let mut hits = Vec::new();
    for (min, max) in geo::search_ranges(shape, lon, lat) {
        if limit > 0 && hits.len() >= limit {
            break;
        }
        // One descent per cell: walk from the first score >= min until one reaches max.
        let start = z.rank_by(|s, _| s < min);
        z.range_while(start, z.len(), false, |m, s| {
            if s >= max {
                return false;
            }
            let (plon, plat) = geo::position(s);
            if let Some(d) = geo::within(shape, lon, lat, plon, plat) {
                hits.push(GeoHit {
                    member: m.to_vec(),
                    dist: d,
                    score: s,
                    lon: plon,
                    lat: plat,
                });
            }
            !(limit > 0 && hits.len() >= limit)
        });
    }
    hits
}

impl Db {
    /// GEOADD of `(longitude, latitude, member)` in the embedded session's database; returns
    /// how many members were added.
    pub fn geoadd(&mut self, key: &[u8], points: &[(f64, f64, &[u8])]) -> OpResult<usize> {
        let mut pairs = Vec::with_capacity(points.len());
        for &(lon, lat, m) in points {
            pairs.push((geo::score_of(lon, lat).ok_or(OpError::OutOfRange)?, m));
        }
        self.zadd(key, &pairs)
    }

    /// GEOSEARCH FROMLONLAT BYRADIUS (metres) ASC in the embedded session's database.
    pub fn geosearch_radius(
        &mut self,
        key: &[u8],
        lon: f64,
        lat: f64,
        radius_m: f64,
    ) -> OpResult<Vec<GeoHit>> {
        let dbi = self.embedded_db();
        let Some(z) = get_z(self, dbi, key)? else {
            return Ok(Vec::new());
        };
        let mut hits = search(z, Shape::Radius(radius_m), lon, lat, 0);
        hits.sort_by(|a, b| a.dist.total_cmp(&b.dist));
        Ok(hits)
    }
}

// ---------------------------------------------------------------------------------------------
// Argument helpers
// ---------------------------------------------------------------------------------------------

fn float_or(a: &[u8], msg: &'static [u8]) -> Result<f64, Vec<u8>> {
    crate::resp::float::parse_double(a).ok_or_else(|| msg.to_vec())
}

/// Longitude and latitude arguments, validated.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Vec<u8>> {
    let x = float_or(lon, b"ERR value is not a valid float")?;
    let y = float_or(lat, b"ERR value is not a valid float")?;
    if !geo::valid(x, y) {
        return Err(format!(
            "ERR invalid longitude,latitude pair {},{}",
            geo::fixed(x, 6, false),
            geo::fixed(y, 6, false)
        )
        .into_bytes());
    }
    Ok((x, y))
}

/// Metres per unit.
fn unit(a: &[u8]) -> Result<f64, Vec<u8>> {
    if args::is(a, "M") {
        Ok(1.0)
    } else if args::is(a, "KM") {
        Ok(1000.0)
    } else if args::is(a, "FT") {
        Ok(0.3048)
    } else if args::is(a, "MI") {
        Ok(1609.34)
    } else {
        Err(b"ERR unsupported unit provided. please use M, KM, FT, MI".to_vec())
    }
}

fn radius(r: &[u8], u: &[u8]) -> Result<(f64, f64), Vec<u8>> {
    let d = float_or(r, b"ERR need numeric radius")?;
    if d < 0.0 {
        return Err(b"ERR radius cannot be negative".to_vec());
    }
    Ok((d, unit(u)?))
}

fn human(w: &mut ReplyWriter<'_>, v: f64) {
    let s = geo::fixed(v, 17, true);
    if w.proto == crate::resp::Proto::Resp3 {
        w.out.push(b',');
        w.out.extend_from_slice(s.as_bytes());
        w.out.extend_from_slice(b"\r\n");
    } else {
        w.bulk(s.as_bytes());
    }
}

fn distance_reply(w: &mut ReplyWriter<'_>, d: f64) {
    w.bulk(geo::distance_text(d).as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

fn geoadd(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let mut i = 2;
    let (mut nx, mut xx) = (false, false);
    while i < a.len() {
        if args::is(a[i], "NX") {
            nx = true;
        } else if args::is(a[i], "XX") {
            xx = true;
        } else if !args::is(a[i], "CH") {
            break;
        }
        i += 1;
    }
    if (a.len() - i) % 3 != 0 || (nx && xx) {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let mut scores: Vec<Vec<u8>> = Vec::with_capacity((a.len() - i) / 3);
    for t in a[i..].chunks_exact(3) {
        match lon_lat(t[0], t[1]) {
            Ok((x, y)) => {
                let s = geo::score_of(x, y).unwrap_or(0.0) as u64;
                scores.push(itoa::Buffer::new().format(s).as_bytes().to_vec());
            }
            Err(m) => return c.out.error(&m),
        }
    }
    let mut zargs: Vec<&[u8]> = Vec::with_capacity(i + scores.len() * 2);
    zargs.push(b"zadd");
    zargs.extend_from_slice(&a[1..i]);
    for (t, s) in a[i..].chunks_exact(3).zip(&scores) {
        zargs.push(s);
        zargs.push(t[2]);
    }
    super::zset::zadd_handler(c, &zargs);
}

fn geopos(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let z = match super::zset::read_z(c.db, c.session.db, a[1]) {
        Ok(z) => z,
        Err(e) => return reply_err(&mut c.out, e),
    };
    c.out.array_len(a.len() - 2);
    for m in &a[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => {
                let (x, y) = geo::position(s);
                c.out.array_len(2);
                human(&mut c.out, x);
                human(&mut c.out, y);
            }
            None => c.out.null_array(),
        }
    }
}

fn geodist(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let to_m = match a.len() {
        4 => 1.0,
        5 => match unit(a[4]) {
            Ok(u) => u,
            Err(m) => return c.out.error(&m),
        },
        _ => return reply_err(&mut c.out, OpError::Syntax),
    };
    let z = match super::zset::read_z(c.db, c.session.db, a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return c.out.null(),
        Err(e) => return reply_err(&mut c.out, e),
    };
    match (z.score(a[2]), z.score(a[3])) {
        (Some(s1), Some(s2)) => {
            let (x1, y1) = geo::position(s1);
            let (x2, y2) = geo::position(s2);
            distance_reply(&mut c.out, geo::distance(x1, y1, x2, y2) / to_m);
        }
        _ => c.out.null(),
    }
}

fn geohash(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let z = match super::zset::read_z(c.db, c.session.db, a[1]) {
        Ok(z) => z,
        Err(e) => return reply_err(&mut c.out, e),
    };
    c.out.array_len(a.len() - 2);
    for m in &a[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => c.out.bulk(&geo::hash_string(s)),
            None => c.out.null(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS lon lat radius unit.
    Coords,
    /// GEORADIUSBYMEMBER member radius unit.
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE.
    Search,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

fn radius_generic(c: &mut Ctx<'_>, a: &[&[u8]], kind: Kind, nostore: bool, searchstore: bool) {
    let dbi = c.session.db;
    let src_idx = if searchstore { 2 } else { 1 };
    let name = String::from_utf8_lossy(a[0]).into_owned();
    // Fail fast on a wrong type; a missing key is handled after the arguments are checked.
    let missing = match super::zset::read_z(c.db, dbi, a[src_idx]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(z) => z.is_none(),
    };
    let mut centre = (0.0, 0.0);
    let mut shape_r: Option<(f64, f64)> = None; // (radius, unit)
    let mut shape_b: Option<(f64, f64, f64)> = None; // (width, height, unit)
    let member_centre = |c: &mut Ctx<'_>, m: &[u8]| -> Option<(f64, f64)> {
        match get_z(c.db, dbi, a[src_idx]) {
            Ok(Some(z)) => z.score(m).map(geo::position),
            _ => None,
        }
    };
    let base = match kind {
        Kind::Coords => {
            match lon_lat(a[2], a[3]) {
                Ok(p) => centre = p,
                Err(m) => return c.out.error(&m),
            }
            match radius(a[4], a[5]) {
                Ok(r) => shape_r = Some(r),
                Err(m) => return c.out.error(&m),
            }
            6
        }
        Kind::Member => {
            if !missing {
                match member_centre(c, a[2]) {
                    Some(p) => centre = p,
                    None => return c.out.error(b"ERR could not decode requested zset member"),
                }
                match radius(a[3], a[4]) {
                    Ok(r) => shape_r = Some(r),
                    Err(m) => return c.out.error(&m),
                }
            }
            5
        }
        Kind::Search => {
            if searchstore {
                3
            } else {
                2
            }
        }
    };
    let search = kind == Kind::Search;
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc) = (false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let mut storekey: Option<&[u8]> = if searchstore { Some(a[1]) } else { None };
    let mut storedist = false;
    let rest = &a[base.min(a.len())..];
    let remaining = rest.len();
    let mut i = 0;
    while i < remaining {
        let arg = rest[i];
        if args::is(arg, "WITHDIST") {
            withdist = true;
        } else if args::is(arg, "WITHHASH") {
            withhash = true;
        } else if args::is(arg, "WITHCOORD") {
            withcoord = true;
        } else if args::is(arg, "ANY") {
            any = true;
        } else if args::is(arg, "ASC") {
            sort = Sort::Asc;
        } else if args::is(arg, "DESC") {
            sort = Sort::Desc;
        } else if args::is(arg, "COUNT") && i + 1 < remaining {
            match args::int(rest[i + 1]) {
                Ok(n) if n > 0 => count = n,
                Ok(_) => return c.out.error(b"ERR COUNT must be > 0"),
                Err(e) => return reply_err(&mut c.out, e),
            }
            i += 1;
        } else if (args::is(arg, "STORE") || args::is(arg, "STOREDIST"))
            && i + 1 < remaining
            && !nostore
            && !search
        {
            storekey = Some(rest[i + 1]);
            storedist = args::is(arg, "STOREDIST");
            i += 1;
        } else if args::is(arg, "STOREDIST") && search && searchstore {
            storedist = true;
        } else if args::is(arg, "FROMMEMBER") && i + 1 < remaining && search && !fromloc {
            if !missing {
                match member_centre(c, rest[i + 1]) {
                    Some(p) => centre = p,
                    None => return c.out.error(b"ERR could not decode requested zset member"),
                }
            }
            frommember = true;
            i += 1;
        } else if args::is(arg, "FROMLONLAT") && i + 2 < remaining && search && !frommember {
            match lon_lat(rest[i + 1], rest[i + 2]) {
                Ok(p) => centre = p,
                Err(m) => return c.out.error(&m),
            }
            fromloc = true;
            i += 2;
        } else if args::is(arg, "BYRADIUS") && i + 2 < remaining && search && shape_b.is_none() {
            match radius(rest[i + 1], rest[i + 2]) {
                Ok(r) => shape_r = Some(r),
                Err(m) => return c.out.error(&m),
            }
            i += 2;
        } else if args::is(arg, "BYBOX") && i + 3 < remaining && search && shape_r.is_none() {
            let w = match float_or(rest[i + 1], b"ERR need numeric width") {
                Ok(v) => v,
                Err(m) => return c.out.error(&m),
            };
            let h = match float_or(rest[i + 2], b"ERR need numeric height") {
                Ok(v) => v,
                Err(m) => return c.out.error(&m),
            };
            if w < 0.0 || h < 0.0 {
                return c.out.error(b"ERR height or width cannot be negative");
            }
            match unit(rest[i + 3]) {
                Ok(u) => shape_b = Some((w, h, u)),
                Err(m) => return c.out.error(&m),
            }
            i += 3;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
        i += 1;
    }
    if storekey.is_some() && (withdist || withhash || withcoord) {
        let what = if searchstore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return c.out.error(
            format!("ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
                .as_bytes(),
        );
    }
    if search && frommember == fromloc {
        return c.out.error(
            format!("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")
                .as_bytes(),
        );
    }
    if search && shape_r.is_some() == shape_b.is_some() {
        return c.out.error(
            format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}").as_bytes(),
        );
    }
    if any && count == 0 {
        return c.out.error(b"ERR the ANY argument requires COUNT argument");
    }
    if missing {
        return match storekey {
            Some(k) => {
                if c.db.keyspace(dbi).delete_stored(k) {
                    c.db.modified(crate::events::class::GENERIC, "del", dbi, k);
                }
                c.out.int(0)
            }
            None => c.out.array_len(0),
        };
    }
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let (shape, conv) = match (shape_r, shape_b) {
        (Some((r, u)), _) => (Shape::Radius(r * u), u),
        (None, Some((w, h, u))) => (Shape::Box(w * u, h * u), u),
        (None, None) => return c.out.array_len(0),
    };
    let limit = if any { count as usize } else { 0 };
    let mut hits = match get_z(c.db, dbi, a[src_idx]) {
        Ok(Some(z)) => search_in(z, shape, centre, limit),
        Ok(None) => Vec::new(),
        Err(e) => return reply_err(&mut c.out, e),
    };
    if hits.is_empty() && storekey.is_none() {
        return c.out.array_len(0);
    }
    match sort {
        Sort::Asc => hits.sort_by(|x, y| {
            x.dist
                .partial_cmp(&y.dist)
                .unwrap_or(std::cmp::Ordering::Equal)
        }),
        Sort::Desc => hits.sort_by(|x, y| {
            y.dist
                .partial_cmp(&x.dist)
                .unwrap_or(std::cmp::Ordering::Equal)
        }),
        Sort::None => {}
    }
    let returned = if count == 0 {
        hits.len()
    } else {
        hits.len().min(count as usize)
    };
    hits.truncate(returned);
    match storekey {
        None => {
            let opts = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
            c.out.array_len(returned);
            for h in &hits {
                if opts > 0 {
                    c.out.array_len(opts + 1);
                }
                c.out.bulk(&h.member);
                if withdist {
                    distance_reply(&mut c.out, h.dist / conv);
                }
                if withhash {
                    c.out.int(h.score as i64);
                }
                if withcoord {
                    c.out.array_len(2);
                    human(&mut c.out, h.lon);
                    human(&mut c.out, h.lat);
                }
            }
        }
        Some(k) => {
            let mut items: Vec<(&[u8], f64)> = hits
                .iter()
                .map(|h| {
                    (
                        &h.member[..],
                        if storedist { h.dist / conv } else { h.score },
                    )
                })
                .collect();
            items.sort_by(|x, y| crate::zset::listpack::cmp_entry(x.1, x.0, y.1, y.0));
            items.dedup_by(|x, y| x.0 == y.0);
            let z = ZSet::from_sorted(limits(c.db), &items);
            let event = if searchstore {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            store(c.db, dbi, k, z, event);
            c.out.int(returned as i64);
        }
    }
}

fn search_in(z: &ZSet, shape: Shape, centre: (f64, f64), limit: usize) -> Vec<GeoHit> {
    search(z, shape, centre.0, centre.1, limit)
}

fn georadius(c: &mut Ctx<'_>, a: &[&[u8]]) {
    radius_generic(c, a, Kind::Coords, false, false);
}
fn georadius_ro(c: &mut Ctx<'_>, a: &[&[u8]]) {
    radius_generic(c, a, Kind::Coords, true, false);
}
fn georadiusbymember(c: &mut Ctx<'_>, a: &[&[u8]]) {
    radius_generic(c, a, Kind::Member, false, false);
}
fn georadiusbymember_ro(c: &mut Ctx<'_>, a: &[&[u8]]) {
    radius_generic(c, a, Kind::Member, true, false);
}
fn geosearch(c: &mut Ctx<'_>, a: &[&[u8]]) {
    radius_generic(c, a, Kind::Search, true, false);
}
fn geosearchstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    radius_generic(c, a, Kind::Search, false, true);
}
