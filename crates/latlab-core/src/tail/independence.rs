//! Independence of the exceedances: the extremal index from the per-second maxima, or the
//! dispersion over the per-minute histograms, and what the estimate makes of it.

use super::*;

/// How dependent the exceedances of the threshold are.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Independence {
    /// θ and the sentence saying how it was found.
    Checked {
        theta: f64,
        significant: bool,
        how: String,
    },
    NotChecked(String),
}

/// The extremal index from the per-second maxima: at a level `v ≥ u` where the exceedances
/// fill at most 30 % of the seconds, θ = T·(−ln(1 − S/T))/K with S the seconds whose maximum
/// reaches v, T the seconds with samples and K the samples at or above v.
pub(super) fn independence(h: &Histogram, u: Nanos, ctx: &TailContext) -> Independence {
    let l = h.layout();
    let t: u64 = ctx
        .per_second
        .iter()
        .map(|s| s.iter().filter(|v| v.is_some()).count() as u64)
        .sum();
    if t >= 10 {
        // K(v) for each non-empty bucket boundary v ≥ u, from the top.
        let mut cum = h.unknown_above();
        let mut level = None;
        for (i, &c) in h.counts().iter().enumerate().rev() {
            if l.lower(i) < u {
                break;
            }
            if c == 0 {
                continue;
            }
            cum += c;
            if cum as f64 <= 0.3 * t as f64 {
                level = Some((l.lower(i), cum));
            }
        }
        let Some((v, kv)) = level.filter(|x| x.1 >= 20) else {
            return Independence::NotChecked(format!(
                "independence not checked: too few exceedances above the threshold to compare with the {t} per-second maxima"
            ));
        };
        let s: u64 = ctx
            .per_second
            .iter()
            .map(|ser| ser.iter().filter(|m| m.is_some_and(|m| m >= v)).count() as u64)
            .sum();
        let (tf, sf, kf) = (t as f64, s as f64, kv as f64);
        if s >= t {
            return Independence::NotChecked(
                "independence not checked: every second holds an exceedance".into(),
            );
        }
        let theta = (tf * -(1.0 - sf / tf).ln() / kf).min(1.0);
        let q0 = 1.0 - (-kf / tf).exp();
        let z = (sf - tf * q0) / (tf * q0 * (1.0 - q0)).sqrt().max(1e-12);
        return Independence::Checked {
            theta,
            significant: z < -3.0,
            how: format!(
                "{kv} samples at or above {} fall in {s} of {t} seconds",
                Human(v)
            ),
        };
    }
    if let Some(iv) = ctx.intervals {
        return dispersion(h.layout(), u, iv);
    }
    Independence::NotChecked(
        "independence not checked: the record has no per-second maxima or per-minute histograms"
            .into(),
    )
}

/// Without per-second maxima: the index of dispersion D of the exceedances of `u` over the
/// per-interval histograms (Poisson counts: D ≈ 1; bursts or a machine that changed: D > 1),
/// taken as θ = 1/D.
pub(super) fn dispersion(l: Layout, u: Nanos, iv: &IntervalHistograms) -> Independence {
    let first = l.index(u) as u64;
    let nb = l.len() as u64;
    let rows: Vec<(f64, f64)> = iv
        .intervals
        .iter()
        .map(|h| {
            let ok = h.iter().filter(|b| b[0] < nb);
            let (mut n, mut k) = (0u64, 0u64);
            for b in ok {
                n = n.saturating_add(b[1]);
                if b[0] >= first {
                    k = k.saturating_add(b[1]);
                }
            }
            (n as f64, k as f64)
        })
        .filter(|r| r.0 > 0.0)
        .collect();
    let n: f64 = rows.iter().map(|r| r.0).sum();
    let k: f64 = rows.iter().map(|r| r.1).sum();
    if rows.len() < 5 || k < 20.0 {
        return Independence::NotChecked(
            "independence not checked: too few per-minute histograms or exceedances in them".into(),
        );
    }
    let x2: f64 = rows
        .iter()
        .map(|&(nj, kj)| {
            let e = k * nj / n;
            (kj - e) * (kj - e) / e.max(1e-12)
        })
        .sum();
    let df = (rows.len() - 1) as f64;
    let d = x2 / df;
    let p = ChiSquared::new(df).map(|c| c.sf(x2)).unwrap_or(1.0);
    Independence::Checked {
        theta: (1.0 / d).min(1.0),
        significant: p < 0.001,
        how: format!(
            "the exceedances per {} vary with an index of dispersion {d:.2} over {} intervals",
            crate::units::format_duration(iv.interval_ns),
            rows.len()
        ),
    }
}

/// The extremal index of the exceedances above `u` and, when they are so clustered that no
/// tail may be fitted, why; a milder clustering, or why it was not checked, goes to `notes`.
pub(super) fn dependence(
    h: &Histogram,
    u: Nanos,
    ctx: &TailContext,
    notes: &mut Vec<String>,
) -> (Option<f64>, Option<String>) {
    match independence(h, u, ctx) {
        Independence::Checked {
            theta,
            significant,
            how,
        } => {
            if significant && theta < THETA_REFUSE {
                (
                    Some(theta),
                    Some(format!(
                        "dependent samples: the exceedances come in bursts ({how}: extremal index {theta:.2}, about {:.1} exceedances per burst); a tail fitted to them would understate its uncertainty",
                        1.0 / theta
                    )),
                )
            } else {
                if significant && theta < 1.0 {
                    notes.push(format!(
                        "exceedances cluster a little ({how}: extremal index {theta:.2}): the goodness of fit and the intervals allow for it"
                    ));
                }
                (Some(theta), None)
            }
        }
        Independence::NotChecked(why) => {
            notes.push(why);
            (None, None)
        }
    }
}
