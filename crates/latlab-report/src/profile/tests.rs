use super::*;
use latlab_core::profile::{Ev, PEvent, Profiler};

/// The palette indices and the palette of a PNG this module wrote, decoded with the png crate.
fn decode(png: &[u8]) -> (u32, u32, Vec<u8>, Vec<u8>) {
    let d = ::png::Decoder::new(std::io::Cursor::new(png));
    let mut r = d.read_info().unwrap();
    let info = r.info().clone();
    assert_eq!(info.color_type, ::png::ColorType::Indexed);
    assert_eq!(info.bit_depth, ::png::BitDepth::Four);
    let palette = info.palette.as_ref().unwrap().to_vec();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let f = r.next_frame(&mut buf).unwrap();
    let mut idx = Vec::new();
    for row in buf[..f.buffer_size()].chunks(f.line_size) {
        for x in 0..info.width as usize {
            let b = row[x / 2];
            idx.push(if x % 2 == 0 { b >> 4 } else { b & 15 });
        }
    }
    (info.width, info.height, idx, palette)
}

fn rgb(c: &str) -> [u8; 3] {
    let v = u32::from_str_radix(&c[1..], 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

fn colour_at(palette: &[u8], i: u8) -> [u8; 3] {
    let i = i as usize * 3;
    [palette[i], palette[i + 1], palette[i + 2]]
}

/// A known series: every pixel of the PNG has the ELC colour of its run-queue length, the
/// unknown and the time after the end the gap colour.
#[test]
fn known_series_gives_known_pixel_colours() {
    let mut px = vec![1u8; 1500];
    px[..12].copy_from_slice(&[0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 254, PIXEL_UNKNOWN]);
    let sc = scale(10_000, px.len(), 2);
    assert_eq!(
        sc,
        Scale {
            merge: 1,
            pixel_ns: 10_000,
            line_ns: 10_000_000,
            lines: 2
        }
    );
    let idx = rq_pixels(&px, &sc);
    let (w, h, got, pal) = decode(&png(&idx, LINE_PIXELS, &RQ_COLOURS));
    assert_eq!((w, h), (1000, 2));
    // Levels: idle, 1, 2, 3–4, 5–8, 9–16, > 16, unknown.
    let want_len = [0usize, 1, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7];
    for (i, &k) in want_len.iter().enumerate() {
        assert_eq!(colour_at(&pal, got[i]), rgb(RQ_COLOURS[k]), "pixel {i}");
    }
    // Line 2 starts at pixel 1000 (10 ms): 1 task up to 1500, then past the end: unknown.
    assert_eq!(colour_at(&pal, got[1000]), rgb(RQ_COLOURS[1]));
    assert_eq!(colour_at(&pal, got[1499]), rgb(RQ_COLOURS[1]));
    assert_eq!(colour_at(&pal, got[1500]), rgb(RQ_COLOURS[7]));
    assert_eq!(colour_at(&pal, got[1999]), rgb(RQ_COLOURS[7]));
    // Every level has its own colour, and the gap colour is none of the scale's.
    let mut c = RQ_COLOURS.to_vec();
    c.dedup();
    c.sort_unstable();
    c.dedup();
    assert_eq!(c.len(), RQ_COLOURS.len());
}

/// Merging pixels keeps the largest known length; unknown only when all merged are.
#[test]
fn merged_pixels_keep_the_largest_known() {
    let sc = Scale {
        merge: 4,
        pixel_ns: 40_000,
        line_ns: 40_000_000,
        lines: 1,
    };
    let px = [
        0,
        3,
        1,
        PIXEL_UNKNOWN,
        PIXEL_UNKNOWN,
        PIXEL_UNKNOWN,
        PIXEL_UNKNOWN,
        PIXEL_UNKNOWN,
        PIXEL_UNKNOWN,
        2,
    ];
    let idx = rq_pixels(&px, &sc);
    assert_eq!(&idx[..4], &[3, 7, 2, 7]);
}

/// The scale: ELC's 10 µs × 10 ms while a map fits 1000 lines, then the next 1-2-5 merge,
/// and with many CPUs fewer lines each so all maps stay within the pixel budget.
#[test]
fn scale_is_chosen_for_long_profiles_and_many_cpus() {
    // 10 s of 10 µs pixels, 2 CPUs (4 maps): exactly 1000 lines of 10 ms.
    assert_eq!(
        scale(10_000, 1_000_000, 4),
        Scale {
            merge: 1,
            pixel_ns: 10_000,
            line_ns: 10_000_000,
            lines: 1000
        }
    );
    // 20 s: 20 µs pixels, 20 ms lines.
    let s = scale(10_000, 2_000_000, 4);
    assert_eq!(
        (s.merge, s.pixel_ns, s.line_ns, s.lines),
        (2, 20_000, 20_000_000, 1000)
    );
    // 12 s still fit; 12.001 s do not.
    assert_eq!(scale(10_000, 1_200_000, 4).merge, 1);
    assert_eq!(scale(10_000, 1_200_001, 4).merge, 2);
    // 10 min with the series' own coarsening (2^20 pixels of 655 µs): kept as they are.
    let s = scale(655_360, 1 << 20, 4);
    assert_eq!((s.merge, s.lines), (1, 1049), "{s:?}");
    // 64 CPUs: 128 maps share the budget.
    let s = scale(10_000, 1_000_000, 128);
    assert!(s.lines * LINE_PIXELS * 128 <= MAX_TOTAL_PIXELS, "{s:?}");
    assert_eq!(s.merge, 20);
    for pixels in [0usize, 1, 999, 1000, 1001, 123_457, 1 << 20, 5_000_001] {
        for maps in [1usize, 2, 4, 16, 128, 1024, 20_000] {
            let s = scale(10_000, pixels, maps);
            let budget = (MAX_TOTAL_PIXELS / LINE_PIXELS / maps).clamp(1, MAX_LINES);
            assert!(s.lines <= budget, "{pixels} {maps} {s:?}");
            assert_eq!(s.pixel_ns, 10_000 * s.merge);
            // The finest that fits: the 1-2-5 step before it would not.
            let prev = match s.merge {
                1 => None,
                m if m.to_string().starts_with('1') => Some(m / 2),
                m if m.to_string().starts_with('2') => Some(m / 2),
                m => Some(m * 2 / 5),
            };
            if let Some(p) = prev {
                assert!(
                    (pixels as u64).div_ceil(p).div_ceil(1000) > budget as u64,
                    "{pixels} {maps} {s:?}"
                );
            }
        }
    }
}

fn series_with(
    px: Vec<u8>,
    switches: Vec<(u64, u32, i64)>,
    migrations: Vec<(u64, i64, u32, u32)>,
) -> Series {
    Series {
        start_ns: 1_000,
        pixel_ns: 10_000,
        cpus: vec![(0, px.clone()), (1, px)],
        switches,
        switches_dropped: 0,
        migrations,
        migrations_dropped: 0,
        names: vec![(7, "<b>seven</b>".into())],
    }
}

/// Switch points: the colour of the task switched to (top tasks by count, idle, others),
/// migrations into the CPU black, unknown where the run queue is, no switch white.
#[test]
fn switch_map_colours_tasks_and_migrations() {
    let mut px = vec![1u8; 1000];
    px[500] = PIXEL_UNKNOWN;
    let t = |p: u64| 1_000 + p * 10_000 + 5;
    let mut sw = vec![
        (t(1), 0, 7),
        (t(2), 0, 7),
        (t(3), 0, 0),
        (t(4), 1, 8),
        (t(5), 0, 8),
    ];
    // pid 7 switched to most, then 8, then 100..108 once each (9 tie for the 6 places left:
    // the lowest pids win them): 106, 107, 108 are "other".
    for (i, pid) in (100..=108).enumerate() {
        sw.push((t(10 + i as u64), 0, pid));
    }
    sw.sort();
    let s = series_with(px, sw, vec![(t(30), 5, 1, 0), (t(31), 5, 0, 1)]);
    let top = top_tasks(&s);
    assert_eq!(top[0], (7, 2));
    assert_eq!(top[1], (8, 2));
    assert_eq!(top.len(), TOP_TASKS);
    let sc = scale(s.pixel_ns, 1000, 4);
    let rq = rq_pixels(&s.cpus[0].1, &sc);
    let idx = switch_pixels(&s, 0, &rq, &sc, &top);
    let (_, _, got, pal) = decode(&png(&idx, LINE_PIXELS, &SW_COLOURS));
    let c = |i: usize| colour_at(&pal, got[i]);
    assert_eq!(c(1), rgb(SW_COLOURS[3])); // pid 7: first top colour
    assert_eq!(c(3), rgb(SW_COLOURS[2])); // idle
    assert_eq!(c(4), rgb(SW_COLOURS[0])); // CPU 1's switch is not CPU 0's
    assert_eq!(c(5), rgb(SW_COLOURS[4])); // pid 8
    assert_eq!(c(18), rgb(SW_COLOURS[11])); // pid 108: other
    assert_eq!(c(30), rgb(SW_COLOURS[12])); // migration into CPU 0
    assert_eq!(c(31), rgb(SW_COLOURS[0])); // migration out of it: not marked
    assert_eq!(c(500), rgb(SW_COLOURS[1])); // unknown run queue
    assert_eq!(c(999), rgb(SW_COLOURS[0]));
    // With switch points dropped, the time after the last kept one is unknown.
    let mut s2 = s.clone();
    s2.switches_dropped = 3;
    let idx = switch_pixels(&s2, 0, &rq, &sc, &top);
    assert_eq!(idx[18], 11);
    assert_eq!(idx[15], 10);
    assert_eq!(idx[19], 1);
    assert_eq!(idx[999], 1);
    assert_eq!(idx[2], 3);
}

fn record() -> ProfileRecord {
    let mut p = Profiler::new(&[0, 1], 1_000, 1_000_000);
    p.watch(9, 0);
    for k in 0..5u64 {
        let t = 1_000 + k * 100_000;
        p.event(&PEvent {
            ts: t,
            cpu: 0,
            lost_before: false,
            lost_after: false,
            ev: Ev::Wakeup {
                pid: 9,
                prio: 4,
                target_cpu: Some(0),
                new: false,
            },
        });
        p.event(&PEvent {
            ts: t + 2_000 + k,
            cpu: 0,
            lost_before: false,
            lost_after: false,
            ev: Ev::Switch {
                prev_pid: 0,
                prev_prio: 120,
                prev_runnable: false,
                prev_dead: false,
                next_pid: 9,
                next_prio: 4,
            },
        });
        p.event(&PEvent {
            ts: t + 9_000,
            cpu: 0,
            lost_before: false,
            lost_after: false,
            ev: Ev::Switch {
                prev_pid: 9,
                prev_prio: 4,
                prev_runnable: false,
                prev_dead: false,
                next_pid: 0,
                next_prio: 120,
            },
        });
    }
    p.finish(1_000_000, 10, |_| "latlab-cpu0<i>".into(), 0, 0).0
}

/// The section: both maps per CPU as decodable PNGs, the scale said, legends with escaped
/// names, the measuring threads' histograms and series.
#[test]
fn section_has_maps_legends_and_measuring_plots() {
    let s = series_with(vec![2u8; 2_000_000], vec![(5_000, 0, 7)], vec![]);
    let html = section(&record(), Ok(&s));
    assert_eq!(html.matches("<img class=\"map\"").count(), 4);
    assert!(html.contains("1 pixel = 20 µs, 1 line = 20 ms"), "{html}");
    assert!(html.contains("&lt;b&gt;seven&lt;/b&gt; (7) (1 switches)"));
    assert!(!html.contains("<b>seven"));
    assert!(html.contains("latlab-cpu0&lt;i&gt;"));
    assert!(html.contains("≥ 5 tasks") && html.contains("unknown (lost events"));
    assert!(
        html.contains("9–16 tasks") && html.contains("&gt; 16 tasks"),
        "the map legend's levels"
    );
    for src in html.split("src=\"data:image/png;base64,").skip(1) {
        let b64 = &src[..src.find('"').unwrap()];
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let (w, h, _, _) = decode(&bytes);
        assert_eq!((w, h), (1000, 1000));
    }
    // Wake-ups 5 (4 intervals), 5 waits of 2000..2004 ns: the table and three plot pairs.
    assert!(html.contains("CPU 0 5"), "{html}");
    assert_eq!(html.matches("<svg").count(), 6);
    assert!(html.contains("measuring threads: run-queue wait"));
    // Without the series: said, no image.
    let html = section(&record(), Err("profile/series.bin: <damaged>".into()));
    assert!(html.contains("No heat maps: profile/series.bin: &lt;damaged&gt;"));
    assert!(!html.contains("<img"));
}

/// The worst case for the HTML size: noise in every pixel of the longest series on many CPUs
/// and every switch point kept; the maps stay within the stated bound.
#[test]
fn html_size_is_bounded_for_the_noisiest_longest_profile() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // 8 CPUs, 16 maps: 500 lines each at most; 10 s of 10 µs pixels merged by 2 fill them.
    let n = 1_000_000;
    let cpus: Vec<(u32, Vec<u8>)> = (0..8u32)
        .map(|c| (c, (0..n).map(|_| (rnd() % 7) as u8).collect()))
        .collect();
    let mut switches: Vec<(u64, u32, i64)> = (0..latlab_core::profile::MAX_SWITCH_POINTS)
        .map(|_| {
            (
                rnd() % (n as u64 * 10_000),
                (rnd() % 8) as u32,
                (rnd() % 40) as i64,
            )
        })
        .collect();
    switches.sort();
    let s = Series {
        start_ns: 0,
        pixel_ns: 10_000,
        cpus,
        switches,
        ..Series::default()
    };
    // The record profiled the series' 8 CPUs (only the profiled CPUs are drawn).
    let mut r = record();
    r.cpus = (0..8u32)
        .map(|c| latlab_core::profile::ProfileCpu {
            cpu: c,
            ..r.cpus[0].clone()
        })
        .collect();
    let html = section(&r, Ok(&s));
    // 4 bits a pixel, base64's 4/3, plus the PNG framing and the text around.
    let bound = MAX_TOTAL_PIXELS / 2 * 4 / 3 + 200_000;
    assert!(html.len() <= bound, "{} > {bound}", html.len());
    let sc = scale(10_000, n, 16);
    assert_eq!(sc.lines * LINE_PIXELS * 16, MAX_TOTAL_PIXELS);
    assert_eq!(html.matches("<img class=\"map\"").count(), 16);
    eprintln!(
        "noisiest 8-CPU profile: {} bytes of HTML, {:?}",
        html.len(),
        sc
    );
}
