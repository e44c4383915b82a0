//! Packaged like a Unix tool (issue 19 §4): `latlab man` renders with man(1) without a
//! warning for every command, and the completion scripts work in their shells. The Debian
//! package itself is built, installed and removed by `scripts/test` ("== package").

use std::io::Write;
use std::process::{Command, Stdio};

mod support;
use support::{bin, cannot_run, latlab};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `latlab ARGS`' stdout; it must succeed.
fn out(args: &[&str]) -> String {
    let o = latlab().args(args).output().unwrap();
    assert!(o.status.success(), "{args:?}: {o:?}");
    assert!(o.stderr.is_empty(), "{args:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// `man --warnings -l -` on `page`: its rendering, and panics on a warning or failure.
fn render(page: &str) -> String {
    let mut child = Command::new("man")
        .args(["--warnings", "-l", "-"])
        .env("MANWIDTH", "80")
        .env("MAN_KEEP_FORMATTING", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(
        o.stderr.is_empty(),
        "man warns: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Bold and underline are overstrikes (`X\bX`) when man writes to a pipe: the text only.
    let mut text = String::new();
    for c in String::from_utf8(o.stdout).unwrap().chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    text
}

#[test]
fn every_man_page_renders_without_warnings() {
    if !have("man") {
        cannot_run(
            "every_man_page_renders_without_warnings",
            "man is not installed (apt-get install man-db groff-base)",
        );
        return;
    }
    let list = out(&["man", "--list"]);
    let cmds: Vec<&str> = list.lines().collect();
    for want in ["run", "import", "loads list", "man", "completions"] {
        assert!(cmds.contains(&want), "{want} in {cmds:?}");
    }
    let top = render(&out(&["man"]));
    assert!(top.contains("NAME"), "{top}");
    assert!(top.contains("latlab-run(1)"), "{top}");
    for c in cmds {
        let args: Vec<&str> = std::iter::once("man").chain(c.split(' ')).collect();
        let page = out(&args);
        assert!(
            page.contains(&format!(".TH latlab-{} 1", c.replace(' ', "-"))),
            "{c}"
        );
        let text = render(&page);
        assert!(text.contains("SYNOPSIS"), "{c}: {text}");
    }
    // The page shows the flags of the command (the import formats among them).
    let import = render(&out(&["man", "import"]));
    assert!(import.contains("--from"), "{import}");
    assert!(import.contains("oslat"), "{import}");
}

#[test]
fn man_of_an_unknown_command_is_one_clear_line() {
    let o = latlab().args(["man", "nosuch"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: error: man: no command 'latlab nosuch'; pages exist for: run,"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// Complete `words` (the last one being completed) with the bash script: the candidates.
fn bash_complete(words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let script = format!(
        "source <('{}' completions bash) || exit 9\n\
         COMP_WORDS=({line}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT={point}\n\
         _latlab latlab '{cur}' '{prev}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        bin().display(),
        cword = words.len() - 1,
        point = line.len(),
        cur = words[words.len() - 1],
        prev = words[words.len() - 2],
    );
    let o = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(o.stderr.is_empty(), "{o:?}");
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_completes_commands_and_formats() {
    if !have("bash") {
        cannot_run("bash_completion_completes_commands_and_formats", "no bash");
        return;
    }
    assert_eq!(bash_complete(&["latlab", "ru"]), vec!["run"]);
    let mut f = bash_complete(&["latlab", "import", "--from", "os"]);
    f.sort();
    assert_eq!(f, vec!["oslat", "oslat-json"]);
    assert_eq!(bash_complete(&["latlab", "completions", "z"]), vec!["zsh"]);
    // The load profiles, for --load and `loads run` (the flag still takes cmd:COMMAND).
    assert_eq!(
        bash_complete(&["latlab", "run", "--load", "hack"]),
        vec!["hackbench"]
    );
    let mut stress = bash_complete(&["latlab", "loads", "run", "stress-c"]);
    stress.sort();
    assert_eq!(stress, vec!["stress-cpu", "stress-cpu8"]);
}

#[test]
fn zsh_and_fish_scripts_are_theirs() {
    let z = out(&["completions", "zsh"]);
    assert!(z.starts_with("#compdef latlab"), "{}", &z[..40]);
    let f = out(&["completions", "fish"]);
    assert!(f.contains("complete -c latlab"), "{}", &f[..200]);
    for (shell, script) in [("zsh", &z), ("fish", &f)] {
        if !have(shell) {
            continue;
        }
        // The shell parses it (syntax only).
        let mut child = Command::new(shell)
            .arg("-n")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{shell}: {o:?}");
    }
    let o = latlab().args(["completions", "tcsh"]).output().unwrap();
    // A usage error is exit 1 (2 is reserved for --max-latency), naming the value.
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("tcsh"), "{o:?}");
}
