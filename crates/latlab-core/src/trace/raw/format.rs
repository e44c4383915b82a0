//! An event's `format` file: its ID, its fields (offset, size, signedness, strings), and what
//! of its `print fmt` the decoder needs (softirq vector names, sched_switch's state letters).

use super::header::field_line;
use super::RawError;

/// How a field holds its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer (or pointer) of `size` bytes.
    Int,
    /// `char name[N]`: a NUL-padded string of N bytes.
    Chars,
    /// `__data_loc char[] name`: a u32, offset (low 16 bits) and length (high 16) of a string
    /// elsewhere in the record.
    DataLoc,
    /// `char name[]` of size 0: a string from `offset` to the end of the record.
    Tail,
    /// Anything else (arrays of other types …): shown as bytes, never read as a value.
    Other,
}

/// One field of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

/// One event's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: u16,
    /// Common fields (`common_*`) first, as in the file.
    pub fields: Vec<Field>,
    pub print_fmt: String,
    /// `__print_symbolic` pairs of the print fmt (softirq's vector names …).
    pub symbols: Vec<(i64, String)>,
    /// `__print_flags` pairs of the print fmt (sched_switch's state letters).
    pub flags: Vec<(u64, String)>,
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

fn err(what: impl Into<String>) -> RawError {
    RawError::new(what)
}

/// Parse one `format` file.
pub fn parse_format(text: &str) -> Result<EventFormat, RawError> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    let mut print_fmt = String::new();
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = l.strip_prefix("ID:") {
            id = v.trim().parse::<u16>().ok();
        } else if let Some(v) = l.strip_prefix("print fmt:") {
            print_fmt = v.trim().to_string();
        } else if let Some(f) = field_line(l) {
            fields.push(field(f.decl, f.offset, f.size, f.signed)?);
        }
    }
    let name = name.ok_or_else(|| err("a format without a name"))?;
    let id = id.ok_or_else(|| err(format!("format of {name}: no (16-bit) ID")))?;
    if fields.is_empty() {
        return Err(err(format!("format of {name}: no fields")));
    }
    let symbols = pairs(&print_fmt, "__print_symbolic(")
        .into_iter()
        .filter_map(|(v, s)| Some((parse_c_int(&v)? as i64, s)))
        .collect();
    let flags = pairs(&print_fmt, "__print_flags(")
        .into_iter()
        .filter_map(|(v, s)| Some((parse_c_int(&v)?, s)))
        .collect();
    Ok(EventFormat {
        name,
        id,
        fields,
        print_fmt,
        symbols,
        flags,
    })
}

fn field(decl: &str, offset: usize, size: usize, signed: bool) -> Result<Field, RawError> {
    let decl = decl.trim();
    let data_loc = decl.starts_with("__data_loc");
    let last = decl.rsplit([' ', '\t', '*']).next().unwrap_or("");
    let (name, array) = match last.find('[') {
        Some(p) => (&last[..p], Some(&last[p + 1..])),
        None => (last, None),
    };
    if name.is_empty() {
        return Err(err(format!("a field without a name: {decl:?}")));
    }
    if offset > u16::MAX as usize || size > u16::MAX as usize {
        return Err(err(format!("field {name}: offset {offset} size {size}")));
    }
    let is_char = decl.starts_with("char ")
        || decl.starts_with("unsigned char ")
        || decl.starts_with("const char ");
    let kind = if data_loc {
        if size != 4 {
            return Err(err(format!("__data_loc field {name} of {size} bytes")));
        }
        FieldKind::DataLoc
    } else if let Some(a) = array {
        if is_char && a == "]" && size == 0 {
            FieldKind::Tail
        } else if is_char && a.strip_suffix(']').and_then(|n| n.parse::<usize>().ok()) == Some(size)
        {
            FieldKind::Chars
        } else {
            FieldKind::Other
        }
    } else if matches!(size, 1 | 2 | 4 | 8) {
        FieldKind::Int
    } else {
        FieldKind::Other
    };
    Ok(Field {
        name: name.to_string(),
        offset,
        size,
        signed,
        kind,
    })
}

/// `{ VALUE, "NAME" }` pairs following `call` in a print fmt (the first such call).
fn pairs(fmt: &str, call: &str) -> Vec<(String, String)> {
    let Some(at) = fmt.find(call) else {
        return vec![];
    };
    let mut out = Vec::new();
    let mut rest = &fmt[at + call.len()..];
    while let Some(open) = rest.find('{') {
        // Stop at the call's closing parenthesis (depth counted from its opening).
        let before = &rest[..open];
        if before.contains(')') && before.matches(')').count() > before.matches('(').count() {
            break;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let inner = &rest[open + 1..open + close];
        if let Some((v, s)) = inner.split_once(',') {
            let s = s.trim();
            // A name as the kernel writes them (HI, NET_RX, S): one printable word. A
            // damaged format (a quote, a brace or a space inside) gives no name, so the text
            // shows the number and reads back the same.
            let plain = |s: &str| {
                !s.is_empty()
                    && !s
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || "\"{}[]".contains(c))
            };
            if let Some(s) = s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                if plain(s) {
                    out.push((v.trim().to_string(), s.to_string()));
                }
            }
        }
        rest = &rest[open + close + 1..];
    }
    out
}

/// A C integer literal: decimal or 0x hex (no expressions).
fn parse_c_int(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if let Some(n) = s.strip_prefix('-') {
        n.parse::<u64>().ok().map(|v| v.wrapping_neg())
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    /// A damaged `__print_symbolic` list (a quote and a brace inside a name, as the trace_raw
    /// fuzz target made one) gives no name for that value: the text shows the number, which
    /// reads back the same (a name with a space did not).
    #[test]
    fn damaged_symbolic_names_are_dropped() {
        let fmt =
            r#"__print_symbolic(REC->vec, { 0, "HI" }, { 1, "TI{ 2, "NET_TX" }, { 3, "NET_RX" })"#;
        let p = super::pairs(fmt, "__print_symbolic(");
        assert_eq!(
            p,
            vec![
                ("0".to_string(), "HI".to_string()),
                ("3".to_string(), "NET_RX".to_string())
            ]
        );
    }
}
