//! CPU lists as the kernel writes them: `0-3,6`.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a CPU list: expected numbers and ranges such as 0-3,6 (CPUs 0..{max})", max = MAX_CPU)]
pub struct CpuListError(pub String);

/// The largest CPU number a list may hold (Linux's NR_CPUS is at most 8192): a list is at
/// most this long, whatever its text says (`0-4000000000` is an error, not 16 GB).
pub const MAX_CPU: u32 = 65_535;

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
            if b < a || b > MAX_CPU {
                return Err(err());
            }
            out.extend(a..=b);
        } else {
            let c: u32 = part.parse().map_err(|_| err())?;
            if c > MAX_CPU {
                return Err(err());
            }
            out.push(c);
        }
        // Repeated ranges cannot grow the list past the CPUs there can be.
        if out.len() > 2 * (MAX_CPU as usize + 1) {
            out.sort_unstable();
            out.dedup();
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
        while i + 1 < cpus.len() && end.checked_add(1) == Some(cpus[i + 1]) {
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
        assert_eq!(
            format_cpu_list(&[u32::MAX - 1, u32::MAX]),
            "4294967294-4294967295"
        );
        assert_eq!(format_cpu_list(&[0, u32::MAX]), "0,4294967295");
    }

    #[test]
    fn lists_are_bounded() {
        assert!(parse_cpu_list("0-4294967295").is_err());
        assert!(parse_cpu_list("65536").is_err());
        assert_eq!(parse_cpu_list("0-65535").unwrap().len(), 65_536);
        let many = vec!["0-65535"; 64].join(",");
        assert_eq!(parse_cpu_list(&many).unwrap().len(), 65_536);
    }
}
