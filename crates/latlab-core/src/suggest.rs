//! "Did you mean …?": the closest of a list of names to a mistyped one, for error lines
//! (`latlab rnu`, `--load hackbnech`, `--durtion`).

/// Edit distance with adjacent transpositions (optimal string alignment): `rnu` → `run` is 1.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, when it is close enough to be a typo of it: at most one
/// edit for names up to 4 characters, else at most a third of the word's length. Ties go to
/// the first candidate. Inputs longer than 64 characters are not typos of a name.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let n = word.chars().count();
    if n == 0 || n > 64 {
        return None;
    }
    let limit = if n <= 4 { 1 } else { n / 3 };
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let dist = distance(word, c);
        if dist <= limit && best.is_none_or(|(b, _)| dist < b) {
            best = Some((dist, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_name_and_strangers_find_none() {
        let cmds = ["run", "report", "compare", "check", "cleanup", "import"];
        assert_eq!(closest("rnu", cmds), Some("run"));
        assert_eq!(closest("reprot", cmds), Some("report"));
        assert_eq!(closest("comapre", cmds), Some("compare"));
        assert_eq!(closest("xyz", cmds), None);
        assert_eq!(closest("", cmds), None);
        let loads = ["hackbench", "stress-cpu", "stress-cpu8", "io-write"];
        assert_eq!(closest("hackbnech", loads), Some("hackbench"));
        assert_eq!(closest("stress-cpu9", loads), Some("stress-cpu"));
        assert_eq!(
            closest("--durtion", ["--duration", "--interval"]),
            Some("--duration")
        );
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("ab", "ba"), 1);
        assert_eq!(distance("", "abc"), 3);
    }
}
