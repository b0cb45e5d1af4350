//! LOLWUT: the server's version, with Redis 5's and 6's computer art for `VERSION 5` and
//! `VERSION 6` (a Schotter of tilting squares in braille dots, a city skyline in ANSI
//! colours). The art is random, as Redis's is; its size follows the same arguments and limits.

use super::{args, strings::reply_err, Ctx};

/// A grid of pixels, each a small colour number.
struct Canvas {
    w: i64,
    h: i64,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: i64, h: i64, fill: u8) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![fill; (w * h) as usize],
        }
    }

    fn set(&mut self, x: i64, y: i64, c: u8) {
        if (0..self.w).contains(&x) && (0..self.h).contains(&y) {
            self.px[(x + y * self.w) as usize] = c;
        }
    }

    fn get(&self, x: i64, y: i64) -> u8 {
        if (0..self.w).contains(&x) && (0..self.h).contains(&y) {
            self.px[(x + y * self.w) as usize]
        } else {
            0
        }
    }

    /// A straight line of pixels between two points, one pixel per step along the longer axis
    /// (integer error accumulation, so no pixel is skipped or doubled).
    fn line(&mut self, (mut x, mut y): (i64, i64), (x2, y2): (i64, i64), c: u8) {
        let (dx, dy) = ((x2 - x).abs(), (y2 - y).abs());
        let (step_x, step_y) = ((x2 - x).signum(), (y2 - y).signum());
        let mut err = dx - dy;
        loop {
            self.set(x, y, c);
            if x == x2 && y == y2 {
                return;
            }
            let twice = 2 * err;
            if twice > -dy {
                err -= dy;
                x += step_x;
            }
            if twice < dx {
                err += dx;
                y += step_y;
            }
        }
    }

    /// The outline of a square of side `side` centred on `(cx, cy)`, turned by `angle`.
    fn square(&mut self, (cx, cy): (i64, i64), side: f64, angle: f64, c: u8) {
        // Corners on the circle through them: radius side/√2, a quarter turn apart.
        let r = (side / std::f64::consts::SQRT_2).round();
        let corner = |k: usize| {
            let a = std::f64::consts::FRAC_PI_4 + angle + k as f64 * std::f64::consts::FRAC_PI_2;
            (
                (a.sin() * r + cx as f64).round() as i64,
                (a.cos() * r + cy as f64).round() as i64,
            )
        };
        for k in 0..4 {
            self.line(corner(k), corner((k + 1) % 4), c);
        }
    }

    /// Braille characters, each showing a 2x4 block of pixels (set = any non-zero colour).
    fn braille(&self) -> String {
        // Dot bit of each pixel of the block, by (dx, dy).
        const DOTS: [(i64, i64, u32); 8] = [
            (0, 0, 0),
            (0, 1, 1),
            (0, 2, 2),
            (1, 0, 3),
            (1, 1, 4),
            (1, 2, 5),
            (0, 3, 6),
            (1, 3, 7),
        ];
        let mut rows = Vec::new();
        for y in (0..self.h).step_by(4) {
            let mut row = String::new();
            for x in (0..self.w).step_by(2) {
                let bits = DOTS
                    .iter()
                    .filter(|(dx, dy, _)| self.get(x + dx, y + dy) != 0)
                    .fold(0u32, |b, (_, _, bit)| b | 1 << bit);
                row.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
            }
            rows.push(row);
        }
        rows.join("\n")
    }

    /// One coloured space per pixel (ANSI background colours: black, two greys, white).
    fn ansi(&self) -> String {
        let mut rows = Vec::new();
        for y in 0..self.h {
            let mut row = String::new();
            for x in 0..self.w {
                let code = match self.get(x, y) {
                    1 => "0;90;100m",
                    2 => "0;37;47m",
                    3 => "0;97;107m",
                    _ => "0;30;40m",
                };
                row.push_str("\x1b[");
                row.push_str(code);
                row.push_str(" \x1b[0m");
            }
            rows.push(row);
        }
        rows.join("\n")
    }
}

/// A random number source for the art.
struct Dice<'a>(&'a mut crate::Db);

impl Dice<'_> {
    /// 0..n.
    fn below(&mut self, n: i64) -> i64 {
        if n <= 0 {
            0
        } else {
            (self.0.random() % n as u64) as i64
        }
    }

    /// 0.0..=1.0.
    fn unit(&mut self) -> f64 {
        (self.0.random() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Georg Nees's Schotter: rows of squares, tilted and shifted more the lower they are.
fn schotter(dice: &mut Dice<'_>, cols: i64, per_row: i64, per_col: i64) -> Canvas {
    let w = cols * 2;
    let pad = if w > 4 { 2 } else { 0 };
    let side = (w - 2 * pad) as f64 / per_row as f64;
    let h = (side * per_col as f64) as i64 + 2 * pad;
    let mut canvas = Canvas::new(w, h, 0);
    for row in 0..per_col {
        for col in 0..per_row {
            let mut cx = (col as f64 * side + side / 2.0) as i64 + pad;
            let mut cy = (row as f64 * side + side / 2.0) as i64 + pad;
            let mut angle = 0.0;
            if row > 1 {
                let mut disorder = || dice.unit() / per_col as f64 * row as f64;
                let (a, dx, dy) = (disorder(), disorder(), disorder());
                let sign = |d: &mut Dice<'_>| if d.below(2) == 1 { -1.0 } else { 1.0 };
                angle = a * sign(dice);
                cx += (dx * sign(dice) * side / 3.0) as i64;
                cy += (dy * sign(dice) * side / 3.0) as i64;
            }
            canvas.square((cx, cy), side, angle, 1);
        }
    }
    canvas
}

/// One building of the skyline: a block of `colour` with its roof two pixels narrower on each
/// side and, when `windows`, lit windows two pixels wide in a grid.
fn building(
    canvas: &mut Canvas,
    dice: &mut Dice<'_>,
    (x0, width, height): (i64, i64, i64),
    colour: u8,
    windows: bool,
) {
    let bottom = canvas.h - 1;
    let top = bottom - height + 1;
    for y in (top..=bottom).rev() {
        for x in x0..x0 + width {
            if y == top && (x <= x0 + 1 || x >= x0 + width - 2) {
                continue;
            }
            let mut c = colour;
            let inside = x > x0 + 1 && x < x0 + width - 2 && y > top + 1 && y < bottom - 1;
            if windows && inside {
                let (rx, ry) = (x - (x0 + 1), y - (top + 1));
                if (rx / 2) % 2 == 1 && ry % 2 == 1 {
                    c = if rx % 2 == 1 {
                        canvas.get(x - 1, y)
                    } else {
                        loop {
                            let lit = 1 + dice.below(2) as u8;
                            if lit != colour {
                                break lit;
                            }
                        }
                    };
                }
            }
            canvas.set(x, y, c);
        }
    }
}

/// A city skyline: two rows of grey buildings behind, black ones with windows in front.
fn skyline(dice: &mut Dice<'_>, cols: i64, rows: i64) -> Canvas {
    let mut canvas = Canvas::new(cols, rows, 3);
    let h = canvas.h;
    for colour in [2u8, 1] {
        let mut x = -10;
        while x < canvas.w {
            x += dice.below(8);
            let width = 10 + dice.below(9);
            let height = h / 2
                + if colour == 2 {
                    dice.below(h) / 2
                } else {
                    dice.below(h) / 3
                };
            building(&mut canvas, dice, (x, width, height), colour, false);
            x += if colour == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut x = -10;
    while x < canvas.w {
        x += dice.below(8);
        let mut width = 5 + dice.below(14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + dice.below(h) / 2;
        building(&mut canvas, dice, (x, width, height), 0, true);
        x += width + 5;
    }
    canvas
}

/// Up to three integer arguments after the version option, each clamped to `lo..=hi`.
fn numbers(c: &mut Ctx<'_>, a: &[&[u8]], defaults: &[i64], hi: &[i64]) -> Option<Vec<i64>> {
    let mut out = defaults.to_vec();
    for (i, slot) in out.iter_mut().enumerate() {
        if let Some(arg) = a.get(i) {
            match args::int(arg) {
                Ok(n) => *slot = n,
                Err(e) => {
                    reply_err(&mut c.out, e);
                    return None;
                }
            }
        }
        *slot = (*slot).clamp(1, hi[i]);
    }
    Some(out)
}

/// LOLWUT [VERSION v] [art arguments].
pub(super) fn lolwut(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let mut version = crate::REDIS_VERSION
        .split('.')
        .next()
        .unwrap_or("7")
        .to_string();
    let mut rest = &a[1..];
    if a.len() >= 3 && args::is(a[1], "VERSION") {
        match args::int(a[2]) {
            Ok(v) => version = (v as u32).to_string(),
            Err(e) => return reply_err(&mut c.out, e),
        }
        rest = &a[3..];
    }
    let footer = |text: &str| format!("{text} Redis ver. {}\n", crate::REDIS_VERSION);
    let text = match version.as_str() {
        "5" => {
            let Some(n) = numbers(c, rest, &[66, 8, 12], &[1000, 200, 200]) else {
                return;
            };
            let art = schotter(&mut Dice(c.db), n[0], n[1], n[2]).braille();
            format!(
                "{art}\n{}",
                footer("Georg Nees - schotter, plotter on paper, 1968.")
            )
        }
        "6" => {
            let Some(n) = numbers(c, rest, &[80, 20], &[1000, 1000]) else {
                return;
            };
            let art = skyline(&mut Dice(c.db), n[0], n[1]).ansi();
            format!(
                "{art}\n{}",
                footer(
                    "Dedicated to the 8 bit game developers of past and present.\n\
                     Original 8 bit image from Plaguemon by hikikomori."
                )
            )
        }
        _ => format!("Redis ver. {}\n", crate::REDIS_VERSION),
    };
    c.out.verbatim(b"txt", text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn art_has_its_size_and_footer() {
        let mut db = crate::Db::new();
        let text = |r: crate::Reply| match r {
            crate::Reply::Bulk(b) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        };
        let five = text(db.execute(&[b"LOLWUT", b"VERSION", b"5"]));
        let lines: Vec<&str> = five.lines().collect();
        assert!(lines.last().unwrap().starts_with("Georg Nees - schotter"));
        // 66 columns of braille characters, 2x4 pixels each.
        assert!(lines[..lines.len() - 1]
            .iter()
            .all(|l| l.chars().count() == 66));
        assert!(five
            .chars()
            .any(|ch| ch != '\u{2800}' && ('\u{2801}'..='\u{28ff}').contains(&ch)));
        let six = text(db.execute(&[b"LOLWUT", b"VERSION", b"6", b"10", b"4"]));
        let lines: Vec<&str> = six.lines().collect();
        assert_eq!(lines.len(), 4 + 2);
        assert_eq!(lines[0].matches(" \x1b[0m").count(), 10);
        assert!(text(db.execute(&[b"LOLWUT"])).starts_with("Redis ver. "));
        assert_eq!(
            db.execute(&[b"LOLWUT", b"VERSION", b"5", b"x"]),
            crate::Reply::Error("ERR value is not an integer or out of range".into())
        );
        let mut c = Canvas::new(5, 5, 0);
        c.line((0, 0), (4, 2), 1);
        assert_eq!(c.px.iter().filter(|&&p| p == 1).count(), 5);
    }
}
