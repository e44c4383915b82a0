//! A profile run's pictures in the HTML report (`latlab profile`, run.json `profile` and its
//! side file `profile/series.bin`): per CPU the run-queue heat map of ELC 2017 (Huang & Yang)
//! and a map of the context-switch points coloured by the task switched to, with migrations
//! into the CPU marked; latlab's measuring threads' cycles and run-queue waits as histograms
//! and over time; the run-queue shares and the worst waits as tables.
//!
//! **Scale.** A map is [`LINE_PIXELS`] pixels wide, one line per 1000 pixels (10 µs pixels
//! and 10 ms lines, as ELC 2017, when that fits). A longer profile merges `m` series pixels
//! into one (m = 1, 2, 5, 10, 20, 50, …; the largest run-queue length wins, a pixel is
//! unknown only when all it merges are) until a map has at most [`MAX_LINES`] lines and all
//! maps together at most [`MAX_TOTAL_PIXELS`] pixels; the caption says the scale
//! ("1 pixel = 40 µs, 1 line = 40 ms"). The images are 4-bit indexed PNGs inline as base64
//! data URIs, so the page stays one file: at most 4 bits per pixel before compression, so the
//! maps add at most about `MAX_TOTAL_PIXELS / 2 × 4/3` bytes (≈ 5.4 MB) to the HTML, usually far
//! less (long runs of one colour compress well).
//!
//! Every name from the trace is untrusted: escaped with [`esc`].

use std::collections::HashMap;
use std::fmt::Write;

use base64::Engine as _;
use latlab_core::profile::{MeasuringKind, ProfileRecord, Series, WaitRow, PIXEL_UNKNOWN};
use latlab_core::units::Human;

use crate::svg::{self, esc};

/// Pixels per line of a map.
pub const LINE_PIXELS: usize = 1000;
/// Lines of one map at most: 12 s of 10 µs series pixels keep ELC's 10 µs × 10 ms.
pub const MAX_LINES: usize = 1200;
/// Pixels of all maps of a report together at most (the lines of each map shrink with many
/// CPUs).
pub const MAX_TOTAL_PIXELS: usize = 8_000_000;
/// Tasks with their own colour in the switch maps (the ones switched to most often).
pub const TOP_TASKS: usize = 8;

/// The run-queue map's colours (RGB): index = a level of tasks on the run queue ([`RQ_LEVELS`]:
/// idle, 1, 2, 3–4, 5–8, 9–16, more; doubling, so a loaded machine is not one colour: under
/// hackbench 91–97 % of the time had 5 or more, the last level of a linear scale), then the
/// unknown state (before the start, after lost events, after the end).
pub const RQ_COLOURS: [&str; 8] = [
    "#ffffff", "#a6d96a", "#fee08b", "#fdae61", "#f46d43", "#d73027", "#67000d", "#9e9e9e",
];
/// The levels' names, index as in [`RQ_COLOURS`].
pub const RQ_LEVELS: [&str; 7] = [
    "idle",
    "1 task",
    "2 tasks",
    "3–4 tasks",
    "5–8 tasks",
    "9–16 tasks",
    "> 16 tasks",
];
const RQ_UNKNOWN: u8 = 7;

/// The level of a run-queue length (index into [`RQ_COLOURS`]).
fn rq_level(n: u8) -> u8 {
    match n {
        0..=2 => n,
        3..=4 => 3,
        5..=8 => 4,
        9..=16 => 5,
        _ => 6,
    }
}
/// The switch map's colours: no switch, unknown, switched to idle, the top tasks, every
/// other task, a migration into the CPU.
const SW_NONE: u8 = 0;
const SW_UNKNOWN: u8 = 1;
const SW_IDLE: u8 = 2;
const SW_TOP: u8 = 3;
const SW_OTHER: u8 = SW_TOP + TOP_TASKS as u8;
const SW_MIGRATION: u8 = SW_OTHER + 1;
pub const SW_COLOURS: [&str; 13] = [
    "#ffffff", "#9e9e9e", "#c6dbef", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#000000",
];

/// The maps' geometry: `merge` series pixels per map pixel, so a map pixel is `pixel_ns`
/// and a line `line_ns`; `lines` lines of [`LINE_PIXELS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub merge: u64,
    pub pixel_ns: u64,
    pub line_ns: u64,
    pub lines: usize,
}

/// The scale for series of `pixels` pixels of `series_pixel_ns` (the longest CPU's), drawn in
/// `maps` maps: the finest 1-2-5 merge that keeps each map within [`MAX_LINES`] lines and all
/// within [`MAX_TOTAL_PIXELS`].
pub fn scale(series_pixel_ns: u64, pixels: usize, maps: usize) -> Scale {
    let max_lines = (MAX_TOTAL_PIXELS / LINE_PIXELS / maps.max(1)).clamp(1, MAX_LINES);
    let lines = |m: u64| (pixels as u64).div_ceil(m).div_ceil(LINE_PIXELS as u64);
    let mut decade = 1u64;
    let merge = 'found: loop {
        for f in [1, 2, 5] {
            let m = decade.saturating_mul(f);
            if lines(m) <= max_lines as u64 || m == u64::MAX {
                break 'found m;
            }
        }
        decade = decade.saturating_mul(10);
    };
    let pixel_ns = series_pixel_ns.saturating_mul(merge);
    Scale {
        merge,
        pixel_ns,
        line_ns: pixel_ns.saturating_mul(LINE_PIXELS as u64),
        lines: lines(merge).max(1) as usize,
    }
}

/// A run-queue map: one colour index per map pixel (row after row), [`RQ_UNKNOWN`] where
/// nothing is known.
pub fn rq_pixels(px: &[u8], sc: &Scale) -> Vec<u8> {
    let mut out = vec![RQ_UNKNOWN; sc.lines * LINE_PIXELS];
    for (o, chunk) in out.iter_mut().zip(px.chunks(sc.merge as usize)) {
        *o = chunk
            .iter()
            .filter(|&&v| v != PIXEL_UNKNOWN)
            .max()
            .map_or(RQ_UNKNOWN, |&v| rq_level(v));
    }
    out
}

/// The tasks of the switch maps' legend: the `TOP_TASKS` switched to most often over all CPUs
/// (idle apart), most first, with their switch counts.
pub fn top_tasks(s: &Series) -> Vec<(i64, u64)> {
    let mut n: HashMap<i64, u64> = HashMap::new();
    for &(_, _, pid) in &s.switches {
        if pid != 0 {
            *n.entry(pid).or_default() += 1;
        }
    }
    let mut v: Vec<(i64, u64)> = n.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(TOP_TASKS);
    v
}

/// A switch map of `cpu`: per map pixel the task switched to by the pixel's last switch
/// (idle, one of `top`, or another), a migration into the CPU over it, unknown where the
/// run-queue state is unknown or past the last switch point kept (when some were dropped).
pub fn switch_pixels(s: &Series, cpu: u32, rq: &[u8], sc: &Scale, top: &[(i64, u64)]) -> Vec<u8> {
    let n = sc.lines * LINE_PIXELS;
    let mut out = vec![SW_NONE; n];
    let at = |ts: u64| -> Option<usize> {
        let i = ts.checked_sub(s.start_ns)? / s.pixel_ns.max(1) / sc.merge;
        (i < n as u64).then_some(i as usize)
    };
    for &(ts, c, pid) in &s.switches {
        if c != cpu {
            continue;
        }
        if let Some(i) = at(ts) {
            out[i] = match top.iter().position(|t| t.0 == pid) {
                _ if pid == 0 => SW_IDLE,
                Some(k) => SW_TOP + k as u8,
                None => SW_OTHER,
            };
        }
    }
    for &(ts, _, _, dest) in &s.migrations {
        if let (true, Some(i)) = (dest == cpu, at(ts)) {
            out[i] = SW_MIGRATION;
        }
    }
    // Past the last switch point kept, switches are not known.
    let cutoff = (s.switches_dropped > 0)
        .then(|| s.switches.last().map_or(0, |x| x.0))
        .and_then(|t| {
            at(t)
                .map(|i| i + 1)
                .or(Some(if t < s.start_ns { 0 } else { n }))
        });
    for (i, o) in out.iter_mut().enumerate() {
        if *o == SW_NONE && (rq.get(i) == Some(&RQ_UNKNOWN) || cutoff.is_some_and(|c| i >= c)) {
            *o = SW_UNKNOWN;
        }
    }
    out
}

/// A 4-bit indexed PNG of `idx` (rows of `width`) with `palette` ("#rrggbb" each).
pub fn png(idx: &[u8], width: usize, palette: &[&str]) -> Vec<u8> {
    let height = idx.len() / width.max(1);
    let mut rgb = Vec::with_capacity(palette.len() * 3);
    for c in palette {
        let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap_or(0);
        rgb.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
    }
    let mut packed = Vec::with_capacity(idx.len() / 2 + height);
    for row in idx.chunks(width.max(1)) {
        for pair in row.chunks(2) {
            let hi = pair[0] & 15;
            let lo = pair.get(1).map_or(0, |v| v & 15);
            packed.push(hi << 4 | lo);
        }
    }
    let mut out = Vec::new();
    {
        let mut e = png::Encoder::new(&mut out, width as u32, height as u32);
        e.set_color(png::ColorType::Indexed);
        e.set_depth(png::BitDepth::Four);
        e.set_palette(rgb);
        // Writing into a Vec cannot fail; a failure would leave an empty image.
        if let Ok(mut w) = e.write_header() {
            let _ = w.write_image_data(&packed);
        }
    }
    out
}

fn img(title: &str, png: &[u8], sc: &Scale) -> String {
    format!(
        "<img class=\"map\" src=\"data:image/png;base64,{}\" width=\"{LINE_PIXELS}\" height=\"{}\" alt=\"{}\" style=\"max-width:100%;height:auto;image-rendering:pixelated;border:1px solid #888;display:block\">",
        base64::engine::general_purpose::STANDARD.encode(png),
        sc.lines,
        esc(title)
    )
}

fn legend(items: &[(&str, String)]) -> String {
    let mut o = String::from("<p class=\"legend meta\">");
    for (c, label) in items {
        let _ = write!(
            o,
            "<span style=\"display:inline-block;margin-right:1em\"><span style=\"display:inline-block;width:1em;height:1em;vertical-align:middle;border:1px solid #888;background:{c}\"></span> {}</span>",
            esc(label)
        );
    }
    o.push_str("</p>\n");
    o
}

/// "10 µs", "40 ms", "2 s": a whole number of the largest unit that divides, else [`Human`].
pub fn dur(ns: u64) -> String {
    for (unit, per) in [("s", 1_000_000_000u64), ("ms", 1_000_000), ("µs", 1_000)] {
        if ns >= per && ns.is_multiple_of(per) {
            return format!("{} {unit}", ns / per);
        }
    }
    Human(ns).to_string()
}

/// How a measuring thread's figures are picked.
pub(crate) type Pick = fn(&latlab_core::profile::MeasuringThread) -> &MeasuringKind;

/// What the measuring threads' table and plots show of each thread.
pub(crate) const MEASURING_KINDS: [(&str, Pick); 3] = [
    ("time between wake-ups", |m| &m.wake_interval),
    ("time between switch-ins", |m| &m.switch_interval),
    ("run-queue wait (wake-up → switch-in)", |m| &m.rq_wait),
];

/// The profile section: `series` is the loaded side file, or why there is none.
pub fn section(p: &ProfileRecord, series: Result<&Series, String>) -> String {
    let mut o = String::new();
    o.push_str("<h2>Scheduler profile</h2>\n");
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} scheduler events over {}; {} lost by the kernel{}; {} tasks seen, {} seeded runnable from /proc at the start.</p>",
        p.events,
        Human(p.duration_ns),
        p.lost_events,
        if p.lost_unknown > 0 {
            format!(" (and {} pages with an unknown loss)", p.lost_unknown)
        } else {
            String::new()
        },
        p.tasks_seen,
        p.seeded_tasks
    );
    o.push_str("<table><tr><th>CPU</th><th>idle</th><th>1</th><th>2</th><th>3</th><th>4</th><th>≥ 5</th><th>switches</th><th>migrations in</th><th>gaps</th></tr>\n");
    for c in &p.cpus {
        let _ = write!(o, "<tr><td>{}</td>", c.cpu);
        for k in 0..6 {
            let v = c.rq_share.get(k).copied().unwrap_or(0.0);
            let _ = write!(o, "<td>{:.1} %</td>", 100.0 * v);
        }
        let _ = writeln!(
            o,
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            c.switches,
            c.migrations,
            Human(c.gap_ns)
        );
    }
    o.push_str("</table>\n<p class=\"meta\">Share of the known time with 0 (idle) … ≥ 5 tasks on the CPU's run queue, the running one included.</p>\n");

    match series {
        Ok(s) => maps(&mut o, s, p),
        Err(why) => {
            let _ = writeln!(o, "<p class=\"warn\">No heat maps: {}.</p>", esc(&why));
        }
    }
    measuring(&mut o, p);

    for g in wait_groups(p, 20) {
        let _ = writeln!(o, "<h3>{}</h3>", esc(&g.title));
        o.push_str("<table><tr><th class=\"k\">task</th><th>pid</th><th>prio</th><th>wake-ups</th><th>p50</th><th>p99</th><th>max</th><th>preemptions</th><th>p99</th><th>max</th></tr>\n");
        for row in &g.rows {
            o.push_str("<tr>");
            for (i, c) in row.iter().enumerate() {
                let k = if i == 0 { " class=\"k\"" } else { "" };
                let _ = write!(o, "<td{k}>{}</td>", esc(c));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    o
}

/// CPUs whose maps are drawn at most: two maps each of at least one line, within
/// [`MAX_TOTAL_PIXELS`].
pub const MAX_MAP_CPUS: usize = MAX_TOTAL_PIXELS / (2 * LINE_PIXELS);

fn maps(o: &mut String, s: &Series, p: &ProfileRecord) {
    // The series is a side file: only the CPUs the record profiled are drawn, and no more
    // than the pictures' budget holds (a series declaring 100 000 CPUs made 200 000 maps).
    let mut cpus: Vec<&(u32, Vec<u8>)> = s
        .cpus
        .iter()
        .filter(|(cpu, _)| p.cpus.iter().any(|c| c.cpu == *cpu))
        .collect();
    let profiled = cpus.len();
    cpus.truncate(MAX_MAP_CPUS);
    if s.cpus.len() > cpus.len() {
        let _ = writeln!(
            o,
            "<p class=\"warn\">The series holds {} CPUs; maps are drawn for {} of them ({} not profiled in this run, {} beyond the {MAX_MAP_CPUS} the page holds).</p>",
            s.cpus.len(),
            cpus.len(),
            s.cpus.len() - profiled,
            profiled - cpus.len(),
        );
    }
    let longest = cpus.iter().map(|c| c.1.len()).max().unwrap_or(0);
    if longest == 0 {
        o.push_str("<p class=\"meta\">No heat maps: the series holds no time.</p>\n");
        return;
    }
    let sc = scale(s.pixel_ns, longest, 2 * cpus.len());
    let top = top_tasks(s);
    let name = |pid: i64| {
        s.names
            .iter()
            .find(|n| n.0 == pid)
            .map_or_else(|| format!("pid {pid}"), |n| format!("{} ({pid})", n.1))
    };
    let scale_text = format!(
        "1 pixel = {}, 1 line = {}",
        dur(sc.pixel_ns),
        dur(sc.line_ns)
    );
    let _ = writeln!(
        o,
        "<h3>Run queues over time</h3>\n<p class=\"meta\">Per CPU, time runs left to right and wraps: <b>{}</b>{}. A pixel shows the most tasks on the run queue at any moment in it.</p>",
        esc(&scale_text),
        if sc.pixel_ns > 10_000 {
            " (coarser than ELC 2017's 10 µs × 10 ms, so the profile fits the picture)"
        } else {
            ""
        }
    );
    let mut rq_items: Vec<(&str, String)> = RQ_LEVELS
        .iter()
        .enumerate()
        .map(|(i, l)| (RQ_COLOURS[i], l.to_string()))
        .collect();
    rq_items.push((
        RQ_COLOURS[RQ_UNKNOWN as usize],
        "unknown (lost events, outside the profile)".into(),
    ));
    o.push_str(&legend(&rq_items));
    let mut rq_maps = Vec::new();
    for (cpu, px) in cpus.iter().copied() {
        let idx = rq_pixels(px, &sc);
        let title = format!("CPU {cpu}: run-queue length, {scale_text}");
        let _ = writeln!(
            o,
            "<figure style=\"margin:.5em 0\">{}<figcaption class=\"meta\">{}</figcaption></figure>",
            img(&title, &png(&idx, LINE_PIXELS, &RQ_COLOURS), &sc),
            esc(&title)
        );
        rq_maps.push((*cpu, idx));
    }

    o.push_str("<h3>Context switches over time</h3>\n");
    let _ = writeln!(
        o,
        "<p class=\"meta\">Same scale (<b>{}</b>): a pixel with a context switch in it has the colour of the task switched to (the last switch in the pixel); black marks a task migrated to the CPU.{}</p>",
        esc(&scale_text),
        if s.switches_dropped > 0 {
            format!(
                " Only the first {} switch points are kept: {} later ones are not drawn (grey after the last kept).",
                s.switches.len(),
                s.switches_dropped
            )
        } else {
            String::new()
        }
    );
    let mut sw_items: Vec<(&str, String)> = vec![(SW_COLOURS[SW_IDLE as usize], "idle".into())];
    for (k, &(pid, n)) in top.iter().enumerate() {
        sw_items.push((
            SW_COLOURS[SW_TOP as usize + k],
            format!("{} ({n} switches)", name(pid)),
        ));
    }
    sw_items.push((SW_COLOURS[SW_OTHER as usize], "other tasks".into()));
    sw_items.push((
        SW_COLOURS[SW_MIGRATION as usize],
        format!(
            "migration to the CPU{}",
            if s.migrations_dropped > 0 {
                format!(" ({} more not kept)", s.migrations_dropped)
            } else {
                String::new()
            }
        ),
    ));
    sw_items.push((SW_COLOURS[SW_NONE as usize], "no switch".into()));
    sw_items.push((SW_COLOURS[SW_UNKNOWN as usize], "unknown".into()));
    o.push_str(&legend(&sw_items));
    for (cpu, rq) in &rq_maps {
        let idx = switch_pixels(s, *cpu, rq, &sc, &top);
        let title = format!("CPU {cpu}: context switches by task switched to, {scale_text}");
        let _ = writeln!(
            o,
            "<figure style=\"margin:.5em 0\">{}<figcaption class=\"meta\">{}</figcaption></figure>",
            img(&title, &png(&idx, LINE_PIXELS, &SW_COLOURS), &sc),
            esc(&title)
        );
    }
}

fn measuring(o: &mut String, p: &ProfileRecord) {
    if p.measuring.is_empty() {
        return;
    }
    o.push_str("<h3>latlab's measuring threads, as the scheduler saw them</h3>\n");
    o.push_str("<table><tr><th>CPU</th><th>tid</th><th class=\"k\">what</th><th>count</th><th>p50</th><th>p99</th><th>max</th></tr>\n");
    let h = |v: Option<u64>| v.map_or("-".to_string(), |v| Human(v).to_string());
    let kinds = MEASURING_KINDS;
    for m in &p.measuring {
        for (i, (what, pick)) in kinds.iter().enumerate() {
            let k = pick(m);
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td class=\"k\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if i == 0 { m.cpu.to_string() } else { String::new() },
                if i == 0 { m.tid.to_string() } else { String::new() },
                esc(what),
                k.count,
                h(k.p50_ns),
                h(k.p99_ns),
                h(k.max_ns)
            );
        }
    }
    o.push_str("</table>\n");
    let _ = writeln!(
        o,
        "<p class=\"meta\">Wake-ups: {}. A wake-up is the thread's <code>sched_waking</code> (else <code>sched_wakeup</code>); its cycle should be the measuring interval, and its run-queue wait is the scheduling part of each sample's latency. {}</p>",
        p.measuring
            .iter()
            .map(|m| format!("CPU {} {}", m.cpu, m.wakeups))
            .collect::<Vec<_>>()
            .join(", "),
        esc(&preemption_note(p))
    );
    for (what, pick) in kinds {
        let series: Vec<(String, svg::Buckets)> = p
            .measuring
            .iter()
            .map(|m| {
                let b = pick(m)
                    .hist
                    .iter()
                    .map(|b| (b[0], b[1].saturating_add(1), b[2]))
                    .collect();
                (format!("CPU {}", m.cpu), b)
            })
            .collect();
        o.push_str(&svg::loglog_buckets(
            &format!("measuring threads: {what}"),
            &format!("{what} (log scale)"),
            "count per bucket (log scale)",
            &series,
        ));
        let step = p.measuring.first().map_or(1, |m| m.bucket_ns.max(1));
        let mut ts: Vec<(String, &[Option<u64>])> = Vec::new();
        for m in &p.measuring {
            ts.push((format!("CPU {} max", m.cpu), &pick(m).max_over_time));
            ts.push((format!("CPU {} p99", m.cpu), &pick(m).p99_over_time));
        }
        o.push_str(&svg::over_time(
            &format!("measuring threads: {what}, per {}", dur(step)),
            &format!("{what} (log scale)"),
            &ts,
            step as f64 / 1e9,
        ));
    }
}

/// One table of run-queue waits: its title (with how many rows it shows of how many) and its
/// rows as plain cells (task, pid, prio, wake-ups, wait p50/p99/max, preemptions, preempted
/// p99/max).
pub(crate) struct WaitGroup {
    pub title: String,
    pub rows: Vec<Vec<String>>,
}

/// The waits tables, at most `shown` rows each: the workload's, then latlab's own threads'
/// (named `latlab…`: the measuring threads, the collector, the loads' supervisor), each worst
/// p99 first as recorded; a group without rows is left out.
pub(crate) fn wait_groups(p: &ProfileRecord, shown: usize) -> Vec<WaitGroup> {
    let (own, others): (Vec<&WaitRow>, Vec<&WaitRow>) =
        p.wait.iter().partition(|w| w.comm.starts_with("latlab"));
    let of_others = p.wait.len() as u64 - own.len() as u64 + p.wait_dropped;
    let of_own = own.len() as u64;
    let h = |v: Option<u64>| v.map_or("-".to_string(), |v| Human(v).to_string());
    [
        (others, "Run-queue waits, worst p99 first", of_others),
        (own, "latlab's own threads' run-queue waits", of_own),
    ]
    .into_iter()
    .filter(|(rows, _, _)| !rows.is_empty())
    .map(|(rows, title, of)| WaitGroup {
        title: format!("{title} ({} of {of} tasks)", rows.len().min(shown)),
        rows: rows
            .iter()
            .take(shown)
            .map(|w| {
                vec![
                    w.comm.clone(),
                    w.pid.to_string(),
                    w.prio.to_string(),
                    w.wakeups.to_string(),
                    h(w.p50_ns),
                    h(w.p99_ns),
                    h(w.max_ns),
                    w.preemptions.to_string(),
                    h(w.preempt_p99_ns),
                    h(w.preempt_max_ns),
                ]
            })
            .collect(),
    })
    .collect()
}

/// The measuring threads' preemptions (switched out while runnable, so switched in again
/// without a wake-up) and who took the CPU: "Preempted: CPU 2 3 times (migration/2 2,
/// ksoftirqd/2 1), CPU 3 never." Plain text, escaped by the caller.
pub(crate) fn preemption_note(p: &ProfileRecord) -> String {
    let per: Vec<String> = p
        .measuring
        .iter()
        .map(|m| match m.preemptions {
            0 => format!("CPU {} never", m.cpu),
            n => {
                let by: Vec<String> = m
                    .preempted_by
                    .iter()
                    .map(|b| format!("{} {}", b.comm, b.count))
                    .collect();
                let times = if n == 1 {
                    "once".to_string()
                } else {
                    format!("{n} times")
                };
                format!("CPU {} {times} ({})", m.cpu, by.join(", "))
            }
        })
        .collect();
    format!(
        "Preempted (switched out while runnable, then switched in without a wake-up): {}.",
        per.join(", ")
    )
}

#[cfg(test)]
mod tests;
