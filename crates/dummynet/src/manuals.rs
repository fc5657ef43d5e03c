//! Man pages and shell completions, made from the command line's own
//! definition (clap's `Command`) so that they cannot say other than the
//! binary does: dummynet(8), one page per subcommand (dummynet-sim(8), ...),
//! dummynet-language(7) from the book's chapter on the language, and
//! completions for bash, zsh and fish. `dummynet install` writes them under
//! the prefix of the binary's directory (`/usr/local/bin` → `/usr/local/share`).

use std::path::PathBuf;

use clap_complete::Shell;

/// The book's chapter on the command language, the source of dummynet-language(7).
const LANGUAGE: &str = include_str!("../../../docs/book/src/reference/language.md");

/// Every file, as a path under the prefix (`share/man/man8/dummynet.8`) and
/// its contents, in a fixed order.
pub fn generate(cmd: &clap::Command) -> Vec<(PathBuf, Vec<u8>)> {
    // The release alone, not the commit `--version` adds: the pages of
    // one release are the same whatever commit built them.
    let mut cmd = cmd.clone().version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    let mut files = Vec::new();
    let man8 = PathBuf::from("share/man/man8");
    files.push((man8.join("dummynet.8"), man_page(cmd.clone())));
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("dummynet-{}", sub.get_name());
        let mut sub = sub.clone().name(name.clone());
        if let Some(v) = cmd.get_version() {
            sub = sub.version(v.to_string());
        }
        let page = man_page(sub);
        files.push((man8.join(format!("{name}.8")), page));
    }
    files.push((
        PathBuf::from("share/man/man7/dummynet-language.7"),
        markdown_to_man(LANGUAGE).into_bytes(),
    ));
    for (shell, path) in [
        (Shell::Bash, "share/bash-completion/completions/dummynet"),
        (Shell::Zsh, "share/zsh/site-functions/_dummynet"),
        (Shell::Fish, "share/fish/vendor_completions.d/dummynet.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), "dummynet", &mut out);
        files.push((PathBuf::from(path), out));
    }
    files
}

fn man_page(cmd: clap::Command) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = clap_mangen::Man::new(cmd).section("8").render(&mut out);
    out
}

/// Backslashes escaped for roff.
fn escape(text: &str) -> String {
    text.replace('\\', "\\e")
}

/// A line roff will not read as a request: a leading `.` or `'` guarded.
fn guard(line: &str) -> String {
    if line.starts_with('.') || line.starts_with('\'') {
        format!("\\&{line}")
    } else {
        line.to_string()
    }
}

/// Inline Markdown to roff: `code` and **strong** in bold, links as their text.
fn inline(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find(['`', '*', '[']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(code) = tail.strip_prefix('`') {
            if let Some(end) = code.find('`') {
                out.push_str(&format!("\\fB{}\\fR", &code[..end]));
                rest = &code[end + 1..];
                continue;
            }
        } else if let Some(strong) = tail.strip_prefix("**") {
            if let Some(end) = strong.find("**") {
                out.push_str(&format!("\\fB{}\\fR", &strong[..end]));
                rest = &strong[end + 2..];
                continue;
            }
        } else if let Some(link) = tail.strip_prefix('[') {
            if let Some((text, after)) = link.split_once("](") {
                if let Some(end) = after.find(')') {
                    out.push_str(text);
                    rest = &after[end + 1..];
                    continue;
                }
            }
        }
        out.push_str(&tail[..1]);
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

/// A paragraph or list item being gathered: its roff request and its text,
/// lines joined (an inline code span may cross a line break).
struct Open {
    request: &'static str,
    text: String,
}

fn flush(out: &mut String, open: &mut Option<Open>) {
    if let Some(o) = open.take() {
        out.push_str(o.request);
        out.push_str(&guard(&inline(&escape(&o.text))));
        out.push('\n');
    }
}

/// The subset of Markdown the book's language chapter uses (headings,
/// paragraphs, lists, fenced blocks, tables) as a man page of section 7.
pub fn markdown_to_man(md: &str) -> String {
    let mut out = String::from(
        ".TH DUMMYNET-LANGUAGE 7 \"\" \"dummynet\" \"dummynet\"\n\
         .SH NAME\n\
         dummynet-language \\- the ipfw and dnctl command language of dummynet\n\
         .SH DESCRIPTION\n",
    );
    let mut in_code = false;
    let mut open: Option<Open> = None;
    for line in md.lines() {
        if line.starts_with("```") {
            flush(&mut out, &mut open);
            out.push_str(if in_code { ".fi\n" } else { ".PP\n.nf\n" });
            in_code = !in_code;
            continue;
        }
        if in_code {
            out.push_str(&guard(&escape(line)));
            out.push('\n');
            continue;
        }
        let trimmed = line.trim_start();
        let item = trimmed.strip_prefix("- ");
        let starts_block = line.starts_with('#') || line.starts_with('|') || item.is_some();
        if line.trim().is_empty() || starts_block {
            flush(&mut out, &mut open);
        }
        if line.starts_with("# ") {
            // The chapter's title: the NAME line says it.
        } else if let Some(h) = line.strip_prefix("## ") {
            out.push_str(&format!(".SH \"{}\"\n", inline(&escape(h)).to_uppercase()));
        } else if let Some(h) = line.strip_prefix("### ") {
            out.push_str(&format!(".SS \"{}\"\n", inline(&escape(h))));
        } else if line.trim().is_empty() {
            out.push_str(".PP\n");
        } else if line.starts_with('|') {
            if line.trim_start_matches(['|', '-', ' ']).is_empty() {
                continue;
            }
            let cells: Vec<String> = line
                .trim()
                .trim_matches('|')
                .split(" | ")
                .map(|c| inline(&escape(&c.trim().replace("\\|", "|"))))
                .collect();
            out.push_str(".IP \\(bu 2\n");
            out.push_str(&guard(&cells.join(" \\(em ")));
            out.push('\n');
        } else if let Some(item) = item {
            let nested = line.len() > trimmed.len();
            open = Some(Open {
                request: if nested {
                    ".IP \\(bu 4\n"
                } else {
                    ".IP \\(bu 2\n"
                },
                text: item.to_string(),
            });
        } else if let Some(o) = open.as_mut() {
            o.text.push(' ');
            o.text.push_str(trimmed);
        } else {
            open = Some(Open {
                request: "",
                text: trimmed.to_string(),
            });
        }
    }
    flush(&mut out, &mut open);
    out.push_str(
        ".SH \"SEE ALSO\"\n\\fBdummynet\\fR(8), \\fBdummynet-run\\fR(8), \
         \\fBdummynet-sim\\fR(8), \\fBipfw\\fR(8) and \\fBdnctl\\fR(8) on FreeBSD\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_roff() {
        let man = markdown_to_man(
            "# T\n\n## Rules\n\nA `pipe` and **this** [link](x.md).\n\n- one `a\n  b`\n  - two\n\n\
             ```\n.dot \\ back\n```\n\n| a | b |\n|---|---|\n| `c` | d |\n",
        );
        assert!(man.contains(".SH \"RULES\"\n"), "{man}");
        assert!(
            man.contains("A \\fBpipe\\fR and \\fBthis\\fR link.\n"),
            "{man}"
        );
        assert!(
            man.contains(".IP \\(bu 2\none \\fBa b\\fR\n.IP \\(bu 4\ntwo\n"),
            "{man}"
        );
        assert!(man.contains(".nf\n\\&.dot \\e back\n.fi\n"), "{man}");
        assert!(man.contains("\\fBc\\fR \\(em d\n"), "{man}");
        assert!(!man.contains("---"), "{man}");
    }
}
