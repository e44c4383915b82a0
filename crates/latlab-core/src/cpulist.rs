//! CPU lists as the kernel writes them: `0-3,6`.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a CPU list: expected numbers and ranges such as 0-3,6")]
pub struct CpuListError(pub String);

/// Parse `0-3,6` into a sorted, de-duplicated list.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, CpuListError> {
    let err = || CpuListError(s.to_string());
    let mut out = Vec::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(out);
    }
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a.trim().parse().map_err(|_| err())?;
            let b: u32 = b.trim().parse().map_err(|_| err())?;
            if b < a || b - a > 65_536 {
                return Err(err());
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| err())?);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Format a sorted list back into ranges: `[0,1,2,3,6]` → `0-3,6`.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lists() {
        assert_eq!(parse_cpu_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpu_list("0,0,1").unwrap(), vec![0, 1]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(format_cpu_list(&[1]), "1");
    }
}
