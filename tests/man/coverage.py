#!/usr/bin/env python3
"""Checks that the manual covers the API and the tools.

- every function of the version script (cmake/librdmacm.map) and every static
  inline function of include/rdma/*.h has a page man/man3/<name>.3, either a
  real page or a one-line ".so manN/page.N" stub whose target exists;
- the page (after following a stub) lists the function in its NAME section
  and shows the prototype exactly as the headers declare it in its SYNOPSIS
  (compared with all white space removed);
- no man3 page is left over for a function that no longer exists;
- every executable built in examples/ has a man/man1/<name>.1 page;
- references to our own pages (rdma_*, the rsocket calls, the tools, rdma_cm
  and rsocket in section 7) point to pages that exist.

Usage: coverage.py SOURCE_DIR [TOOL...]
The tools are the executable targets of examples/ (CMake passes them); without
them, the literal add_executable() names of examples/CMakeLists.txt are used.
"""
import re
import sys
from pathlib import Path

STUB = re.compile(r"^\.so (man[1-8]/[\w.+-]+\.[1-8])\n?$")


def map_functions(path):
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    names = set()
    for block in re.findall(r"global:(.*?)(?:local:|\})", text, flags=re.S):
        names.update(re.findall(r"\b([A-Za-z_]\w*)\s*;", block))
    return names


def header_declarations(include_dir):
    """name -> declaration text (without body), and the set of inline names."""
    decls, inline = {}, set()
    for header in sorted(include_dir.glob("*.h")):
        text = header.read_text()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
        for m in re.finditer(r"([^;{}]*?)\b([A-Za-z_]\w*)\s*\(([^(){};]*)\)\s*([;{])", text):
            prefix, name, params, end = m.groups()
            prefix = prefix.strip()
            if not prefix or prefix.startswith("extern") or "=" in prefix:
                continue
            if name in ("if", "for", "while", "switch", "return", "sizeof"):
                continue
            decls.setdefault(name, f"{prefix} {name}({params});")
            if end == "{" and re.match(r"static\s+inline\b", prefix):
                inline.add(name)
    return decls, inline


def squash(s):
    return re.sub(r"\s+", "", s)


def roff_args(line):
    """The arguments of a macro line, roff quoting rules, escapes resolved."""
    args, cur, quoted, i = [], "", False, 0
    while i < len(line):
        c = line[i]
        if c == '"':
            if quoted and line[i + 1:i + 2] == '"':
                cur += '"'
                i += 1
            else:
                quoted = not quoted
        elif c in " \t" and not quoted:
            if cur:
                args.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur:
        args.append(cur)
    return args


def unescape(s):
    s = s.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "").replace("\\ ", " ")
    return re.sub(r"\\f[BIRP]|\\f\(..|\\f\[[A-Z]*\]", "", s)


def section(text, name):
    m = re.search(r"^\.SH " + name + r"\n(.*?)(?=^\.SH |\Z)", text, flags=re.M | re.S)
    return m.group(1) if m else ""


def synopsis_text(text):
    out = []
    for line in section(text, "SYNOPSIS").splitlines():
        if line.startswith("."):
            parts = roff_args(line[1:])
            out.append("".join(parts[1:]))
        else:
            out.append(line)
    return unescape("".join(out))


def name_list(text):
    head = unescape(section(text, "NAME").replace("\n", " "))
    return {n.strip() for n in head.split(" - ", 1)[0].split(",")}


def main():
    src = Path(sys.argv[1]).resolve()
    man = src / "man"
    errors = []

    exported = map_functions(src / "cmake" / "librdmacm.map")
    decls, inline = header_declarations(src / "include" / "rdma")
    functions = exported | inline

    def resolve(page):
        """Text of the page a man3 name leads to, following one .so."""
        text = page.read_text()
        m = STUB.match(text)
        if m:
            target = man / m.group(1)
            if not target.is_file():
                errors.append(f"{page.relative_to(src)}: stub target {m.group(1)} missing")
                return None
            return target.read_text()
        return text

    for fn in sorted(functions):
        page = man / "man3" / f"{fn}.3"
        if not page.is_file():
            errors.append(f"{fn}: no page man/man3/{fn}.3")
            continue
        text = resolve(page)
        if text is None:
            continue
        if fn not in name_list(text):
            errors.append(f"{fn}: not listed in the NAME section of its page")
        if fn not in decls:
            errors.append(f"{fn}: no prototype found in include/rdma/*.h")
        elif squash(decls[fn]) not in squash(synopsis_text(text)):
            errors.append(f"{fn}: SYNOPSIS lacks the header's prototype: {' '.join(decls[fn].split())}")

    for page in sorted((man / "man3").glob("*.3")):
        if page.stem not in functions:
            errors.append(f"man/man3/{page.name}: no such function in the map or headers")

    tools = set(sys.argv[2:]) or set(re.findall(
        r"add_executable\(\s*([\w.+-]+)", (src / "examples" / "CMakeLists.txt").read_text()))
    for tool in sorted(tools):
        if not (man / "man1" / f"{tool}.1").is_file():
            errors.append(f"{tool}: no page man/man1/{tool}.1")

    ours = {p.stem: p.suffix[1:] for p in man.glob("man[1-8]/*.[1-8]")}
    own_refs = functions | tools | {"rdma_cm", "rsocket"}
    for page in sorted(man.glob("man[1-8]/*.[1-8]")):
        for name, sec in re.findall(r"^\.BR \\?%?([\w.+-]+) \((\d)\)", page.read_text(), flags=re.M):
            if (name in own_refs or name.startswith("rdma_")) and ours.get(name) != sec:
                errors.append(f"{page.relative_to(src)}: reference to {name}({sec}), which has no page")

    for e in errors:
        print("FAIL:", e)
    print(f"{len(functions)} functions ({len(exported)} exported, {len(inline)} inline), "
          f"{len(tools)} tools: {'ok' if not errors else f'{len(errors)} problem(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
