//! The numerical optimisers of the fit: Nelder–Mead in two variables, a bounded search in
//! one, and Illinois false position for a root.

/// Nelder–Mead maximisation of `f` over two variables.
pub(super) fn nelder_mead(
    f: &dyn Fn([f64; 2]) -> f64,
    start: [f64; 2],
    step: [f64; 2],
) -> ([f64; 2], f64) {
    let mut pts = [
        start,
        [start[0] + step[0], start[1]],
        [start[0], start[1] + step[1]],
    ];
    let mut val = pts.map(|p| {
        let v = f(p);
        if v.is_nan() {
            f64::NEG_INFINITY
        } else {
            v
        }
    });
    let g = |p: [f64; 2]| {
        let v = f(p);
        if v.is_nan() {
            f64::NEG_INFINITY
        } else {
            v
        }
    };
    for _ in 0..400 {
        // Order best (largest) first.
        let mut idx = [0usize, 1, 2];
        idx.sort_by(|&i, &j| val[j].total_cmp(&val[i]));
        pts = idx.map(|i| pts[i]);
        val = idx.map(|i| val[i]);
        if val[0].is_finite()
            && (val[0] - val[2]).abs() <= 1e-9 * (1.0 + val[0].abs())
            && (pts[0][0] - pts[2][0]).abs() + (pts[0][1] - pts[2][1]).abs() < 1e-5
        {
            break;
        }
        let c = [(pts[0][0] + pts[1][0]) / 2.0, (pts[0][1] + pts[1][1]) / 2.0];
        let at = |t: f64| [c[0] + t * (pts[2][0] - c[0]), c[1] + t * (pts[2][1] - c[1])];
        let r = at(-1.0);
        let fr = g(r);
        if fr > val[0] {
            let e = at(-2.0);
            let fe = g(e);
            if fe > fr {
                pts[2] = e;
                val[2] = fe;
            } else {
                pts[2] = r;
                val[2] = fr;
            }
        } else if fr > val[1] {
            pts[2] = r;
            val[2] = fr;
        } else {
            let (k, fk) = if fr > val[2] {
                let k = at(-0.5);
                (k, g(k))
            } else {
                let k = at(0.5);
                (k, g(k))
            };
            if fk > val[2].max(fr) {
                pts[2] = k;
                val[2] = fk;
            } else {
                // Shrink towards the best.
                for i in 1..3 {
                    pts[i] = [(pts[0][0] + pts[i][0]) / 2.0, (pts[0][1] + pts[i][1]) / 2.0];
                    val[i] = g(pts[i]);
                }
            }
        }
    }
    let best = (0..3)
        .max_by(|&i, &j| val[i].total_cmp(&val[j]))
        .unwrap_or(0);
    (pts[best], val[best])
}

/// Maximise a function of one variable on [lo, hi]: a grid, then golden sections around the
/// best grid point.
pub(super) fn max_1d(f: &dyn Fn(f64) -> f64, lo: f64, hi: f64, grid: usize) -> (f64, f64) {
    let step = (hi - lo) / grid as f64;
    let mut best = (lo, f64::NEG_INFINITY);
    for i in 0..=grid {
        let x = lo + step * i as f64;
        let v = f(x);
        if v > best.1 {
            best = (x, v);
        }
    }
    if best.1 == f64::NEG_INFINITY {
        return best;
    }
    let (mut a, mut b) = ((best.0 - step).max(lo), (best.0 + step).min(hi));
    const G: f64 = 0.618_033_988_749_894_8;
    let mut x1 = b - G * (b - a);
    let mut x2 = a + G * (b - a);
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..30 {
        if f1 >= f2 {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - G * (b - a);
            f1 = f(x1);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + G * (b - a);
            f2 = f(x2);
        }
        if b - a < 1e-4 {
            break;
        }
    }
    for (x, v) in [(x1, f1), (x2, f2)] {
        if v > best.1 {
            best = (x, v);
        }
    }
    best
}

/// Illinois false position on [a, b] with f(a) > 0 > f(b).
pub(super) fn illinois(
    f: &dyn Fn(f64) -> f64,
    mut a: f64,
    mut fa: f64,
    mut b: f64,
    mut fb: f64,
) -> f64 {
    let mut side = 0;
    for _ in 0..40 {
        let c = (a * fb - b * fa) / (fb - fa);
        if !c.is_finite() || (b - a).abs() < 1e-5 {
            break;
        }
        let fc = f(c);
        let fc = if fc.is_nan() { -1.0 } else { fc };
        if fc > 0.0 {
            a = c;
            fa = fc;
            if side == 1 {
                fb /= 2.0;
            }
            side = 1;
        } else {
            b = c;
            fb = fc;
            if side == -1 {
                fa /= 2.0;
            }
            side = -1;
        }
    }
    (a * fb - b * fa) / (fb - fa)
}
