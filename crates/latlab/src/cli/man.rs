//! `latlab man [COMMAND…]` and `latlab completions SHELL`: the manual page (roff, from the
//! clap definition with `clap_mangen`) and shell completion scripts (`clap_complete`), both on
//! stdout, so they are always those of this binary. `latlab man --list` names every command
//! that has a page (`scripts/deb.sh` installs one per line).

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, CommandFactory, ValueEnum};

use super::Cli;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (`run`, `loads list`); none: latlab's own page
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// List every command that has a page, one per line
    #[arg(long, conflicts_with = "command")]
    pub list: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    pub shell: Shell,
}

/// The command tree, built (so each subcommand knows its full name, `latlab-loads-list`).
fn built() -> clap::Command {
    let mut cmd = Cli::command();
    cmd.build();
    cmd
}

/// Every command path with a page, depth first: `run`, `loads`, `loads list`, …
fn paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let mut p = prefix.to_vec();
        p.push(sub.get_name().to_string());
        out.push(p.clone());
        paths(sub, &p, out);
    }
}

pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let root = built();
    if args.list {
        let mut all = Vec::new();
        paths(&root, &[], &mut all);
        let text: String = all.iter().map(|p| p.join(" ") + "\n").collect();
        crate::stdout::write(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut cmd = &root;
    for (i, name) in args.command.iter().enumerate() {
        cmd = match cmd.find_subcommand(name) {
            Some(c) if !c.is_hide_set() => c,
            _ => {
                let path = args.command[..i].join(" ");
                let known: Vec<&str> = cmd
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set() && c.get_name() != "help")
                    .map(|c| c.get_name())
                    .collect();
                let shown: String = name.escape_debug().collect();
                if known.is_empty() {
                    bail!("man: 'latlab {path}' has no subcommands, so no page for '{shown}'");
                }
                bail!(
                    "man: no command 'latlab {}{shown}'; pages exist for: {} (latlab man --list shows all)",
                    if path.is_empty() { String::new() } else { format!("{path} ") },
                    known.join(", ")
                );
            }
        };
    }
    crate::stdout::write(&page(cmd, &args.command.join(" "))?)?;
    Ok(ExitCode::SUCCESS)
}

/// `cmd`'s page: clap_mangen's sections, its notes (`after_help`) as NOTES with indented
/// lines kept, then latlab's EXAMPLES and EXIT STATUS (latlab_report::manual).
fn page(cmd: &clap::Command, path: &str) -> std::io::Result<Vec<u8>> {
    use latlab_report::manual;
    let man = clap_mangen::Man::new(cmd.clone());
    let mut o = Vec::new();
    man.render_title(&mut o)?;
    man.render_name_section(&mut o)?;
    man.render_synopsis_section(&mut o)?;
    man.render_description_section(&mut o)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut o)?;
    }
    if cmd.get_subcommands().any(|c| !c.is_hide_set()) {
        man.render_subcommands_section(&mut o)?;
    }
    if let Some(h) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        o.extend(manual::notes_section(&h.to_string()).bytes());
    }
    o.extend(manual::examples_section(path).bytes());
    o.extend(manual::exit_status_section(path).bytes());
    man.render_version_section(&mut o)?;
    Ok(o)
}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut cmd, "latlab", &mut out);
    crate::stdout::write(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line split as sh would (single quotes only).
    fn words(line: &str) -> Vec<String> {
        let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
        for c in line.chars() {
            match c {
                '\'' => quoted = !quoted,
                ' ' if !quoted => out.extend((!cur.is_empty()).then(|| std::mem::take(&mut cur))),
                c => cur.push(c),
            }
        }
        out.extend((!cur.is_empty()).then_some(cur));
        out
    }

    #[test]
    fn every_example_is_a_valid_command_line() {
        let root = built();
        let mut all = vec![vec![]];
        paths(&root, &[], &mut all);
        let mut n = 0;
        for p in &all {
            for (_, line) in latlab_report::manual::examples(&p.join(" ")) {
                let w = words(line);
                assert_eq!(w[0], "latlab", "{line}");
                if let Err(e) = <Cli as clap::Parser>::try_parse_from(&w) {
                    panic!("{line}: {e}");
                }
                if w[1] == "cyclictest" {
                    // Its flags are cyclictest's, parsed by the front end (CPUs 0-3 usable).
                    if let Err(e) = latlab_engine::cyclictest_cli::parse(&w[2..], &[0, 1, 2, 3]) {
                        panic!("{line}: {e}");
                    }
                }
                n += 1;
            }
        }
        assert!(n >= 20, "{n} examples");
    }

    #[test]
    fn every_page_renders_with_its_full_name() {
        let root = built();
        let mut all = Vec::new();
        paths(&root, &[], &mut all);
        assert!(all.iter().any(|p| p == &["run"]), "{all:?}");
        assert!(all.iter().any(|p| p == &["loads", "list"]), "{all:?}");
        for p in &all {
            let mut c = &root;
            for n in p {
                c = c.find_subcommand(n).unwrap();
            }
            let page = String::from_utf8(page(c, &p.join(" ")).unwrap()).unwrap();
            assert!(page.contains(".SH \"EXIT STATUS\""), "{p:?}");
            let title = format!(".TH latlab-{} 1", p.join("-"));
            assert!(
                page.contains(&title),
                "{title} in {}",
                &page[..200.min(page.len())]
            );
        }
    }
}
