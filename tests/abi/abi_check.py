#!/usr/bin/env python3
"""Compare the project's public headers with the installed rdma-core headers.

Everything compared is extracted from what the compiler sees, never from a
hand-written list:

  layout     every struct/union (and anonymous aggregate reachable through a
             member) declared in the five headers: size, alignment, and for
             every member its offset, size, alignment, type spelling and order.
             Source: DWARF of a TU built with -g -fno-eliminate-unused-debug-types
             (read with pyelftools), cross-checked by a generated program that
             prints sizeof/_Alignof/offsetof.
  enums      every enum, its size and every enumerator value (DWARF).
  typedefs   every typedef declared by the headers (DWARF).
  macros     every macro the headers themselves define (attributed through the
             line markers of `cc -E -dD`, so macros of included system headers
             are excluded), each header preprocessed alone.  Object-like macros
             are compared by evaluated value and type; those that are not
             constant expressions by their token text; function-like ones by
             presence and parameter list.
  functions  every prototype, static inline ones included: linkage, inline,
             return type, parameter types, variadic (names from gcc -aux-info,
             signatures from DWARF of a TU that takes every function's address).
  includes   the #include directives of each header, in order.
  linkage    every non-inline function keeps C linkage when included from C++.

Items we have and rdma-core 44 does not are accepted only when they are listed,
with their exact rendering, in the allowlist; an allowlisted item that is
missing or different is an error too.

Sub-commands: extract (facts of both header sets into a cache file), check,
compile, selftest.  Exit status 0 on success, 1 on a
mismatch, 2 on a setup problem.
"""

import argparse
import concurrent.futures
import hashlib
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

try:
    from elftools.elf.elffile import ELFFile
except ImportError:  # pragma: no cover - reported as a setup error
    ELFFile = None

HEADERS = [
    "rdma/rdma_cma.h",
    "rdma/rdma_verbs.h",
    "rdma/rsocket.h",
    "rdma/rdma_cma_abi.h",
    "infiniband/ib.h",
]

ALL_CHECKS = ["layout", "enums", "typedefs", "macros", "functions", "includes",
              "linkage"]

# Flags for the extraction compiles: GNU C so that __typeof__ and __auto_type
# are available; the header compile tests use strict modes separately.
EXTRACT_STD = "-std=gnu11"


class SetupError(Exception):
    pass


def run(cmd, cwd=None, check=True):
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    if check and proc.returncode != 0:
        raise SetupError("command failed: %s\n%s%s" % (
            " ".join(cmd), proc.stdout, proc.stderr))
    return proc


def norm_ws(text):
    return " ".join(text.split())


# --------------------------------------------------------------------------
# DWARF helpers

def attr(die, name, default=None):
    a = die.attributes.get(name)
    return default if a is None else a.value


def die_name(die):
    v = attr(die, "DW_AT_name")
    return v.decode() if isinstance(v, bytes) else v


def die_type(die):
    if "DW_AT_type" not in die.attributes:
        return None
    return die.get_DIE_from_attribute("DW_AT_type")


AGG_KW = {
    "DW_TAG_structure_type": "struct",
    "DW_TAG_union_type": "union",
    "DW_TAG_enumeration_type": "enum",
}


def strip_cv(t):
    while t is not None and t.tag in ("DW_TAG_const_type",
                                      "DW_TAG_volatile_type",
                                      "DW_TAG_restrict_type",
                                      "DW_TAG_atomic_type"):
        t = die_type(t)
    return t


def array_dims(t):
    dims = []
    for sub in t.iter_children():
        if sub.tag != "DW_TAG_subrange_type":
            continue
        if "DW_AT_count" in sub.attributes:
            dims.append(attr(sub, "DW_AT_count"))
        elif "DW_AT_upper_bound" in sub.attributes:
            ub = attr(sub, "DW_AT_upper_bound")
            dims.append(ub + 1 if isinstance(ub, int) else None)
        else:
            dims.append(None)  # flexible array member
    return dims


def spell(t):
    """C-like spelling of a DWARF type, keeping typedef names."""
    if t is None:
        return "void"
    tag = t.tag
    if tag in ("DW_TAG_base_type", "DW_TAG_typedef", "DW_TAG_unspecified_type"):
        return die_name(t)
    if tag in AGG_KW:
        return "%s %s" % (AGG_KW[tag], die_name(t) or "<anonymous>")
    if tag in ("DW_TAG_const_type", "DW_TAG_volatile_type",
               "DW_TAG_restrict_type", "DW_TAG_atomic_type"):
        q = {"DW_TAG_const_type": "const", "DW_TAG_volatile_type": "volatile",
             "DW_TAG_restrict_type": "restrict",
             "DW_TAG_atomic_type": "_Atomic"}[tag]
        inner = die_type(t)
        if inner is not None and inner.tag == "DW_TAG_pointer_type":
            return "%s %s" % (spell(inner), q)
        return "%s %s" % (q, spell(inner))
    if tag == "DW_TAG_pointer_type":
        inner = die_type(t)
        if inner is not None and inner.tag == "DW_TAG_subroutine_type":
            return "%s (*)(%s)" % (spell(die_type(inner)), spell_params(inner))
        s = spell(inner)
        return s + ("*" if s.endswith("*") else " *")
    if tag == "DW_TAG_array_type":
        return spell(die_type(t)) + "".join(
            "[%s]" % ("" if d is None else d) for d in array_dims(t))
    if tag == "DW_TAG_subroutine_type":
        return "%s (%s)" % (spell(die_type(t)), spell_params(t))
    return "<%s>" % tag


def spell_params(fn):
    params = []
    for c in fn.iter_children():
        if c.tag == "DW_TAG_formal_parameter":
            params.append(spell(die_type(c)))
        elif c.tag == "DW_TAG_unspecified_parameters":
            params.append("...")
    if not params and attr(fn, "DW_AT_prototyped"):
        params.append("void")
    return ", ".join(params)


def type_size(t):
    if t is None:
        return None
    if "DW_AT_byte_size" in t.attributes:
        return attr(t, "DW_AT_byte_size")
    if t.tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
                 "DW_TAG_restrict_type", "DW_TAG_atomic_type"):
        return type_size(die_type(t))
    if t.tag == "DW_TAG_array_type":
        n = type_size(die_type(t))
        for d in array_dims(t):
            if n is None:
                return None
            n *= 0 if d is None else d
        return n
    return None


def member_offset(m):
    loc = attr(m, "DW_AT_data_member_location", 0)
    if isinstance(loc, int):
        return loc
    # DWARF 2 style location expression: DW_OP_plus_uconst <n>
    if isinstance(loc, list) and loc and loc[0] == 0x23:
        n, shift = 0, 0
        for b in loc[1:]:
            n |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                break
        return n
    raise SetupError("unsupported member location %r" % (loc,))


def anon_aggregate(t):
    """The anonymous struct/union behind t (through cv and arrays), if any."""
    t = strip_cv(t)
    path_suffix = ""
    while t is not None and t.tag == "DW_TAG_array_type":
        path_suffix += "[0]" * len(array_dims(t))
        t = strip_cv(die_type(t))
    if t is not None and t.tag in ("DW_TAG_structure_type",
                                   "DW_TAG_union_type") and not die_name(t):
        return t, path_suffix
    return None, ""


def walk_members(agg, prefix, base, out):
    """Flatten the members of agg; anonymous aggregates are expanded.

    Keys are C access paths (members of unnamed members are reachable by
    their own name); an unnamed member itself is keyed '(anonymous#i)'.
    """
    index = 0
    for m in agg.iter_children():
        if m.tag != "DW_TAG_member":
            continue
        name = die_name(m)
        t = die_type(m)
        off = base + member_offset(m)
        key = prefix + name if name else "%s(anonymous#%d)" % (prefix, index)
        index += 1
        bits = None
        if "DW_AT_bit_size" in m.attributes:
            bits = (attr(m, "DW_AT_bit_size"),
                    attr(m, "DW_AT_data_bit_offset",
                         attr(m, "DW_AT_bit_offset")))
        out.append({
            "key": key,
            "parent": prefix,
            "offset": off,
            "size": type_size(t),
            "type": spell(t),
            "bits": bits,
            "accessible": "(anonymous#" not in key and bits is None,
        })
        sub, suffix = anon_aggregate(t)
        if sub is not None:
            if name:
                walk_members(sub, key + suffix + ".", off, out)
            else:
                walk_members(sub, prefix, off, out)


# --------------------------------------------------------------------------
# Fact extraction for one header set

class HeaderSet:
    """One set of the five headers: 'ref' (system) or 'ours' (-I dir)."""

    def __init__(self, label, include_dir, cc, workdir, ours_dir):
        self.label = label
        self.include_dir = include_dir  # None for the system set
        self.cc = cc
        self.workdir = os.path.join(workdir, label)
        self.ours_dir = os.path.realpath(ours_dir)
        os.makedirs(self.workdir, exist_ok=True)
        self._cache = {}

    def cflags(self):
        return ["-I", self.include_dir] if self.include_dir else []

    def write(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def cached(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    # -- preprocessing: header paths, macros --------------------------------

    def preprocess(self, headers, tag):
        src = self.write("pp_%s.c" % tag,
                         "".join("#include <%s>\n" % h for h in headers))
        out = run([self.cc, EXTRACT_STD, "-E", "-dD"] + self.cflags() + [src])
        return out.stdout

    def header_paths(self):
        """Absolute path of each of the five headers as this set resolves it."""
        def compute():
            text = self.preprocess(HEADERS, "all")
            files = set(m.group(1) for m in
                        re.finditer(r'^# \d+ "([^"]+)"', text, re.M))
            paths = {}
            for h in HEADERS:
                hits = sorted(set(os.path.realpath(f) for f in files
                                  if os.path.realpath(f).endswith("/" + h)))
                if len(hits) != 1:
                    raise SetupError("%s set: %s resolved to %r" %
                                     (self.label, h, hits))
                p = hits[0]
                inside = p.startswith(self.ours_dir + os.sep)
                if inside != (self.label == "ours"):
                    raise SetupError(
                        "%s set picked up %s for <%s>: the include path "
                        "mixes the two header sets" % (self.label, p, h))
                paths[h] = p
            return paths
        return self.cached("paths", compute)

    def owner(self, path):
        """Which of the five headers a path is, or None."""
        rp = os.path.realpath(path)
        for h, p in self.header_paths().items():
            if rp == p:
                return h
        return None

    def macros(self, header):
        """Macros defined by the five headers when `header` is included alone."""
        def compute():
            text = self.preprocess([header], re.sub(r"\W", "_", header))
            current = None
            found = {}
            for line in text.splitlines():
                m = re.match(r'^# \d+ "([^"]+)"', line)
                if m:
                    current = self.owner(m.group(1))
                    continue
                if current is None:
                    continue
                m = re.match(r"^#define ([A-Za-z_]\w*)(\([^)]*\))?(.*)$", line)
                if m:
                    params = None
                    if m.group(2) is not None:
                        params = ",".join(
                            p.strip() for p in m.group(2)[1:-1].split(","))
                    found[m.group(1)] = {"params": params,
                                         "body": norm_ws(m.group(3)),
                                         "file": current}
                    continue
                m = re.match(r"^#undef ([A-Za-z_]\w*)", line)
                if m:
                    found.pop(m.group(1), None)
            self.evaluate_macros(header, found)
            return found
        return self.cached(("macros", header), compute)

    def evaluate_macros(self, header, macros):
        """Add 'value' (type + value text) to every constant object-like macro."""
        cands = [n for n, m in sorted(macros.items())
                 if m["params"] is None and m["body"]]
        tag = "ev_" + re.sub(r"\W", "_", header)
        while True:
            lines = ["#include <%s>" % header, "#include <stdio.h>",
                     MACRO_PRINTERS]
            first = len(lines) + MACRO_PRINTERS.count("\n") + 1
            for i, n in enumerate(cands):
                lines.append("static __auto_type const ev_%d = (%s);" % (i, n))
            lines.append("int main(void)\n{")
            for i, n in enumerate(cands):
                lines.append('\tPRINT("%s", ev_%d);' % (n, i))
            lines.append("\treturn 0;\n}\n")
            src = self.write(tag + ".c", "\n".join(lines))
            exe = os.path.join(self.workdir, tag)
            proc = run([self.cc, EXTRACT_STD, "-w", "-ftrack-macro-expansion=0",
                        "-fno-diagnostics-show-caret"] + self.cflags() +
                       ["-o", exe, src], check=False)
            if proc.returncode == 0:
                break
            bad = set()
            second = first + len(cands) + 2  # first PRINT line in main()
            for m in re.finditer(r"^%s:(\d+):\d+: error" % re.escape(src),
                                 proc.stderr, re.M):
                for i in (int(m.group(1)) - first, int(m.group(1)) - second):
                    if 0 <= i < len(cands):
                        bad.add(cands[i])
            if not bad:
                raise SetupError("macro evaluation program failed:\n" +
                                 proc.stderr)
            cands = [n for n in cands if n not in bad]
        out = run([exe]).stdout
        for line in out.splitlines():
            name, typ, val = line.split("\t", 2)
            macros[name]["value"] = "%s %s" % (typ, val)

    # -- DWARF: types, enums, typedefs, functions ---------------------------

    def function_names(self):
        def compute():
            src = self.write("aux.c",
                             "".join("#include <%s>\n" % h for h in HEADERS))
            aux = os.path.join(self.workdir, "aux.txt")
            run([self.cc, EXTRACT_STD, "-fsyntax-only", "-aux-info", aux] +
                self.cflags() + [src])
            names = []
            with open(aux) as f:
                for line in f:
                    m = re.match(r"/\* (.+?):\d+:\w+ \*/ (.*)$", line)
                    if not m or self.owner(m.group(1)) is None:
                        continue
                    decl = m.group(2).split(";")[0]
                    n = re.search(r"(\w+) \(", decl)
                    if n and n.group(1) not in names:
                        names.append(n.group(1))
            return names
        return self.cached("funcs", compute)

    def dwarf(self):
        def compute():
            names = self.function_names()
            body = "".join("#include <%s>\n" % h for h in HEADERS)
            body += "typedef void (*abi_fn)(void);\n"
            body += "__attribute__((used)) static abi_fn const abi_keep[] = {\n"
            body += "".join("\t(abi_fn)&%s,\n" % n for n in names)
            body += "\t0\n};\n"
            src = self.write("dwarf.c", body)
            obj = os.path.join(self.workdir, "dwarf.o")
            run([self.cc, EXTRACT_STD, "-w", "-O0", "-g", "-gdwarf-4",
                 "-fno-eliminate-unused-debug-types", "-c", "-o", obj] +
                self.cflags() + [src])
            return self.parse_dwarf(obj)
        return self.cached("dwarf", compute)

    def parse_dwarf(self, obj):
        facts = {"types": {}, "enums": {}, "typedefs": {}, "functions": {}}
        with open(obj, "rb") as f:
            elf = ELFFile(f)
            if not elf.has_dwarf_info():
                raise SetupError("no DWARF in %s" % obj)
            dwarf = elf.get_dwarf_info()
            for cu in dwarf.iter_CUs():
                top = cu.get_top_DIE()
                comp_dir = attr(top, "DW_AT_comp_dir", b"").decode()
                lp = dwarf.line_program_for_CU(cu)
                dirs = [d.decode() for d in lp.header["include_directory"]]
                files = []
                for fe in lp.header["file_entry"]:
                    d = comp_dir if fe.dir_index == 0 else dirs[fe.dir_index - 1]
                    files.append(os.path.join(d, fe.name.decode()))

                def decl_header(die):
                    idx = attr(die, "DW_AT_decl_file")
                    if not idx or idx > len(files):
                        return None
                    return self.owner(files[idx - 1])

                for die in cu.iter_DIEs():
                    h = decl_header(die)
                    if h is None:
                        continue
                    self.collect(die, h, facts)
        return facts

    def collect(self, die, h, facts):
        tag = die.tag
        name = die_name(die)
        if tag in ("DW_TAG_structure_type", "DW_TAG_union_type") and name:
            key = "%s %s" % (AGG_KW[tag], name)
            if attr(die, "DW_AT_declaration"):
                facts["types"].setdefault(key, {"header": h, "incomplete": True})
                return
            members = []
            walk_members(die, "", 0, members)
            facts["types"][key] = {"header": h, "incomplete": False,
                                   "size": attr(die, "DW_AT_byte_size"),
                                   "members": members}
        elif tag == "DW_TAG_enumeration_type":
            enumerators = [(die_name(e), attr(e, "DW_AT_const_value"))
                           for e in die.iter_children()
                           if e.tag == "DW_TAG_enumerator"]
            if name:
                key = "enum " + name
            elif enumerators:
                key = "enum <anonymous: %s...>" % enumerators[0][0]
            else:
                return
            facts["enums"][key] = {"header": h, "named": bool(name),
                                   "size": attr(die, "DW_AT_byte_size"),
                                   "enumerators": enumerators}
        elif tag == "DW_TAG_typedef" and name:
            facts["typedefs"][name] = {"header": h,
                                       "type": spell(die_type(die))}
        elif tag == "DW_TAG_subprogram" and name:
            ext = bool(attr(die, "DW_AT_external"))
            inline = attr(die, "DW_AT_inline", 0) in (2, 3)
            ret = spell(die_type(die))
            sig = "%s%s%s %s%s%s(%s)" % (
                "extern" if ext else "static",
                " inline" if inline else "",
                "" if attr(die, "DW_AT_prototyped") else " <unprototyped>",
                ret, "" if ret.endswith("*") else " ", name,
                spell_params(die))
            facts["functions"][name] = {"header": h, "sig": sig,
                                        "external": ext}

    def layout_eval(self):
        """sizeof/_Alignof/offsetof as the compiler computes them."""
        def compute():
            d = self.dwarf()
            lines = ["#include <%s>" % h for h in HEADERS]
            lines += ["#include <stdio.h>", "#include <stddef.h>",
                      "int main(void)", "{"]
            for key, t in sorted(d["types"].items()):
                if t["incomplete"]:
                    continue
                lines.append('\tprintf("T\\t%s\\t%%zu\\t%%zu\\n", sizeof(%s), '
                             '_Alignof(%s));' % (key, key, key))
                for m in t["members"]:
                    if not m["accessible"]:
                        continue
                    expr = "((%s *)0)->%s" % (key, m["key"])
                    lines.append(
                        '\tprintf("M\\t%s\\t%s\\t%%zu\\t%%zu\\t%%zu\\n", '
                        'offsetof(%s, %s), sizeof(%s), _Alignof(__typeof__(%s)));'
                        % (key, m["key"], key, m["key"], expr, expr))
            for key, e in sorted(d["enums"].items()):
                if e["named"]:
                    lines.append('\tprintf("T\\t%s\\t%%zu\\t%%zu\\n", sizeof(%s), '
                                 '_Alignof(%s));' % (key, key, key))
            lines += ["\treturn 0;", "}", ""]
            src = self.write("layout.c", "\n".join(lines))
            exe = os.path.join(self.workdir, "layout")
            run([self.cc, EXTRACT_STD, "-w"] + self.cflags() +
                ["-o", exe, src])
            res = {}
            for line in run([exe]).stdout.splitlines():
                f = line.split("\t")
                if f[0] == "T":
                    res[f[1]] = (int(f[2]), int(f[3]))
                else:
                    res[(f[1], f[2])] = (int(f[3]), int(f[4]), int(f[5]))
            return res
        return self.cached("layout", compute)

    def includes(self, header):
        path = self.header_paths()[header]
        inc = []
        with open(path) as f:
            for line in f:
                m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
                if m:
                    inc.append(m.group(1))
        return inc


MACRO_PRINTERS = r"""
static void p_s(const char *n, const char *t, long long v)
{ printf("%s\t%s\t%lld\n", n, t, v); }
static void p_u(const char *n, const char *t, unsigned long long v)
{ printf("%s\t%s\t%llu\n", n, t, v); }
static void p_f(const char *n, const char *t, long double v)
{ printf("%s\t%s\t%La\n", n, t, v); }
static void p_str(const char *n, const char *t, const char *v)
{
	printf("%s\t%s\t\"", n, t);
	for (; *v; v++)
		printf((*v >= 32 && *v < 127 && *v != '"' && *v != '\\') ? "%c" : "\\x%02x",
		       (unsigned char)*v);
	printf("\"\n");
}
static void p_p(const char *n, const char *t, const void *v)
{ printf("%s\t%s\t%p\n", n, t, v); }
#define TYPE_NAME(x) _Generic((x), _Bool: "_Bool", char: "char", \
	signed char: "signed char", unsigned char: "unsigned char", \
	short: "short", unsigned short: "unsigned short", int: "int", \
	unsigned int: "unsigned int", long: "long", unsigned long: "unsigned long", \
	long long: "long long", unsigned long long: "unsigned long long", \
	float: "float", double: "double", long double: "long double", \
	char *: "char *", const char *: "const char *", default: "pointer")
#define PRINT(n, x) _Generic((x), _Bool: p_u, char: p_s, signed char: p_s, \
	unsigned char: p_u, short: p_s, unsigned short: p_u, int: p_s, \
	unsigned int: p_u, long: p_s, unsigned long: p_u, long long: p_s, \
	unsigned long long: p_u, float: p_f, double: p_f, long double: p_f, \
	char *: p_str, const char *: p_str, default: p_p)(n, TYPE_NAME(x), x)
"""


# --------------------------------------------------------------------------
# Allowlist

ALLOW_KINDS = ("type", "member", "enumerator", "enum", "typedef", "macro",
               "function", "include")


def load_allowlist(path):
    allow = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[0] not in ALLOW_KINDS:
                raise SetupError("%s:%d: bad allowlist line" % (path, lineno))
            detail = norm_ws(parts[2]) if len(parts) > 2 else ""
            allow[(parts[0], parts[1])] = detail
    return allow


# --------------------------------------------------------------------------
# Comparison

class Report:
    def __init__(self):
        self.errors = []
        self.counts = {}
        self.allow_used = set()

    def error(self, check, msg):
        line = "ABI MISMATCH [%s] %s" % (check, msg)
        if line not in self.errors:
            self.errors.append(line)

    def count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n


def extra(report, allow, check, kind, name, detail):
    """An item only we have: fine iff allowlisted with the same rendering."""
    want = allow.get((kind, name))
    if want is None:
        report.error(check, "%s %s is not in rdma-core 44 and not allowlisted "
                     "(ours: %s)" % (kind, name, detail))
        return
    report.allow_used.add((kind, name))
    if norm_ws(detail) != want:
        report.error(check, "allowlisted %s %s differs: ours '%s', allowlist "
                     "'%s'" % (kind, name, detail, want))


def check_layout(ref, ours, allow, rep):
    rt, ot = ref.dwarf()["types"], ours.dwarf()["types"]
    rl, ol = ref.layout_eval(), ours.layout_eval()
    if "struct rdma_cm_id" not in rt:
        raise SetupError("reference DWARF has no struct rdma_cm_id: "
                         "extraction is broken")
    for key, r in sorted(rt.items()):
        o = ot.get(key)
        if o is None:
            rep.error("layout", "%s (from %s) is missing" % (key, r["header"]))
            continue
        rep.count("aggregate types")
        if r["incomplete"] or o["incomplete"]:
            if r["incomplete"] != o["incomplete"]:
                rep.error("layout", "%s: complete in one set only" % key)
            continue
        if r["size"] != o["size"]:
            rep.error("layout", "%s: sizeof %s, rdma-core %s" %
                      (key, o["size"], r["size"]))
        if rl.get(key) != ol.get(key):
            rep.error("layout", "%s: (sizeof, _Alignof) = %s, rdma-core %s" %
                      (key, ol.get(key), rl.get(key)))
        rmem = {m["key"]: m for m in r["members"]}
        omem = {m["key"]: m for m in o["members"]}
        for m in r["members"]:
            k = m["key"]
            om = omem.get(k)
            rep.count("members")
            if om is None:
                rep.error("layout", "%s: member %s (%s) is missing" %
                          (key, k, m["type"]))
                continue
            for field in ("type", "offset", "size", "bits"):
                if m[field] != om[field]:
                    rep.error("layout", "%s.%s: %s is %r, rdma-core has %r" %
                              (key, k, field, om[field], m[field]))
            if m["accessible"] and rl.get((key, k)) != ol.get((key, k)):
                rep.error("layout", "%s.%s: (offsetof, sizeof, _Alignof) = %s, "
                          "rdma-core %s" % (key, k, ol.get((key, k)),
                                            rl.get((key, k))))
        for m in o["members"]:
            if m["key"] not in rmem:
                extra(rep, allow, "layout", "member", "%s.%s" % (
                    key.replace(" ", ":"), m["key"]), m["type"])
        # Declaration order, extras aside.
        order_r = [m["key"] for m in r["members"]]
        order_o = [m["key"] for m in o["members"] if m["key"] in rmem]
        if order_r != order_o and all(k in omem for k in order_r):
            rep.error("layout", "%s: member order %s, rdma-core %s" %
                      (key, order_o, order_r))
    for key, o in sorted(ot.items()):
        if key not in rt:
            extra(rep, allow, "layout", "type", key.replace(" ", ":"),
                  "declared in %s" % o["header"])


def check_enums(ref, ours, allow, rep):
    re_, oe = ref.dwarf()["enums"], ours.dwarf()["enums"]
    if not re_:
        raise SetupError("reference DWARF has no enums: extraction is broken")
    rval = {n: (v, k) for k, e in re_.items() for n, v in e["enumerators"]}
    oval = {n: (v, k) for k, e in oe.items() for n, v in e["enumerators"]}
    for key, e in sorted(re_.items()):
        rep.count("enums")
        o = oe.get(key)
        if o is None:
            rep.error("enums", "%s (from %s) is missing" % (key, e["header"]))
        elif e["size"] != o["size"]:
            rep.error("enums", "%s: size %s, rdma-core %s" %
                      (key, o["size"], e["size"]))
    for n, (v, k) in sorted(rval.items()):
        rep.count("enumerators")
        if n not in oval:
            rep.error("enums", "enumerator %s (= %s in %s) is missing" % (n, v, k))
        elif oval[n] != (v, k):
            rep.error("enums", "enumerator %s = %s in %s, rdma-core has %s in %s"
                      % (n, oval[n][0], oval[n][1], v, k))
    for n, (v, k) in sorted(oval.items()):
        if n not in rval:
            extra(rep, allow, "enums", "enumerator", n, "= %s in %s" % (v, k))
    for key in sorted(set(oe) - set(re_)):
        extra(rep, allow, "enums", "enum", key.replace(" ", ":"),
              "declared in %s" % oe[key]["header"])


def check_typedefs(ref, ours, allow, rep):
    rt, ot = ref.dwarf()["typedefs"], ours.dwarf()["typedefs"]
    for n, t in sorted(rt.items()):
        rep.count("typedefs")
        if n not in ot:
            rep.error("typedefs", "typedef %s (%s) is missing" % (n, t["type"]))
        elif ot[n]["type"] != t["type"]:
            rep.error("typedefs", "typedef %s is %s, rdma-core %s" %
                      (n, ot[n]["type"], t["type"]))
    for n in sorted(set(ot) - set(rt)):
        extra(rep, allow, "typedefs", "typedef", n, ot[n]["type"])


def render_macro(m):
    if m["params"] is not None:
        return "(%s)" % m["params"]
    if "value" in m:
        return "= " + m["value"]
    return "text '%s'" % m["body"]


def check_macros(ref, ours, allow, rep):
    seen = set()
    for h in HEADERS:
        rm, om = ref.macros(h), ours.macros(h)
        if h == "rdma/rdma_cma.h" and "RDMA_UDP_QKEY" not in rm:
            raise SetupError("reference macros look empty: extraction broken")
        for n, m in sorted(rm.items()):
            if (h, n) not in seen:
                rep.count("macros")
                seen.add((h, n))
            where = "%s (including %s alone)" % (n, h)
            o = om.get(n)
            if o is None:
                rep.error("macros", "%s: missing, rdma-core defines it %s" %
                          (where, render_macro(m)))
            elif render_macro(o) != render_macro(m):
                rep.error("macros", "%s: ours %s, rdma-core %s" %
                          (where, render_macro(o), render_macro(m)))
        for n, o in sorted(om.items()):
            if n not in rm:
                extra(rep, allow, "macros", "macro", n, render_macro(o))


def check_functions(ref, ours, allow, rep):
    rf, of = ref.dwarf()["functions"], ours.dwarf()["functions"]
    if len(rf) < 10 or len(rf) != len(ref.function_names()):
        raise SetupError("reference functions: DWARF has %d of %d names" %
                         (len(rf), len(ref.function_names())))
    if len(of) != len(ours.function_names()):
        missing = set(ours.function_names()) - set(of)
        raise SetupError("no DWARF for our functions %s" % sorted(missing))
    for n, f in sorted(rf.items()):
        rep.count("functions")
        if n not in of:
            rep.error("functions", "%s (%s) is missing" % (n, f["sig"]))
        elif of[n]["sig"] != f["sig"]:
            rep.error("functions", "%s: ours '%s', rdma-core '%s'" %
                      (n, of[n]["sig"], f["sig"]))
    for n in sorted(set(of) - set(rf)):
        extra(rep, allow, "functions", "function", n, of[n]["sig"])


def check_includes(ref, ours, allow, rep):
    for h in HEADERS:
        ri, oi = ref.includes(h), ours.includes(h)
        rep.count("include directives", len(ri))
        for x in ri:
            if x not in oi:
                rep.error("includes", "%s does not include <%s>" % (h, x))
        for x in oi:
            if x not in ri:
                extra(rep, allow, "includes", "include", h, x)
        common = [x for x in oi if x in ri]
        if common != [x for x in ri if x in oi]:
            rep.error("includes", "%s: include order %s, rdma-core %s" %
                      (h, common, ri))


def check_linkage(ref, ours, allow, rep, cxx):
    """Non-inline functions must keep C linkage when included from C++."""
    funcs = [n for n, f in sorted(ours.dwarf()["functions"].items())
             if f["external"]]
    body = "".join("#include <%s>\n" % h for h in HEADERS)
    body += "void *abi_linkage_refs[] = {\n"
    body += "".join("\treinterpret_cast<void *>(&%s),\n" % n for n in funcs)
    body += "};\n"
    src = ours.write("linkage.cc", body)
    obj = os.path.join(ours.workdir, "linkage.o")
    run([cxx, "-std=c++11", "-w", "-c", "-o", obj] + ours.cflags() + [src])
    with open(obj, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        undefined = set(s.name for s in symtab.iter_symbols()
                        if s["st_shndx"] == "SHN_UNDEF" and s.name)
    for n in funcs:
        rep.count("C-linkage functions")
        if n not in undefined:
            mangled = sorted(s for s in undefined if n in s)
            rep.error("linkage", "%s does not have C linkage in C++ (symbols: %s)"
                      % (n, mangled))


def run_checks(ref, ours, allow, checks, cxx):
    rep = Report()
    fns = {"layout": check_layout, "enums": check_enums,
           "typedefs": check_typedefs, "macros": check_macros,
           "functions": check_functions, "includes": check_includes}
    for c in checks:
        if c == "linkage":
            check_linkage(ref, ours, allow, rep, cxx)
        else:
            fns[c](ref, ours, allow, rep)
    # Every allowlisted item of a kind these checks cover must have been seen.
    covered = {"layout": ("type", "member"), "enums": ("enum", "enumerator"),
               "typedefs": ("typedef",), "macros": ("macro",),
               "functions": ("function",), "includes": ("include",)}
    kinds = set(k for c in checks for k in covered.get(c, ()))
    for key in sorted(allow):
        if key[0] in kinds and key not in rep.allow_used:
            rep.error("allowlist", "%s %s is allowlisted but we do not provide "
                      "it" % key)
    return rep


def prefetch(sets, checks):
    """Run the independent compiles of both sets in parallel."""
    jobs = []
    for s in sets:
        s.header_paths()
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
        for s in sets:
            if set(checks) & {"layout", "enums", "typedefs", "functions",
                              "linkage"}:
                jobs.append(ex.submit(s.dwarf))
            if "macros" in checks:
                jobs += [ex.submit(s.macros, h) for h in HEADERS]
        for j in jobs:
            j.result()
        if "layout" in checks:
            for j in [ex.submit(s.layout_eval) for s in sets]:
                j.result()


def make_sets(args, workdir, ours_dir):
    ref = HeaderSet("ref", None, args.cc, workdir, ours_dir)
    ours = HeaderSet("ours", os.path.abspath(ours_dir), args.cc, workdir,
                     ours_dir)
    return ref, ours


def stamp(sets):
    """Content hash of everything the cached facts depend on."""
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    for s in sets:
        h.update(s.label.encode() + s.cc.encode())
        for hdr, path in sorted(s.header_paths().items()):
            with open(path, "rb") as f:
                h.update(hdr.encode() + f.read())
    return h.hexdigest()


def load_cache(path, sets):
    """Reuse facts saved by `extract` if the headers have not changed since."""
    if not path or not os.path.exists(path):
        return False
    try:
        with open(path, "rb") as f:
            saved = pickle.load(f)
    except Exception:  # unreadable or from another version: recompute
        return False
    if saved.get("stamp") != stamp(sets):
        return False
    for s in sets:
        if s.label not in saved["facts"]:
            return False
    for s in sets:
        s._cache.update(saved["facts"][s.label])
    return True


def cmd_extract(args):
    with tempfile.TemporaryDirectory(prefix="abi_extract.") as workdir:
        ref, ours = make_sets(args, workdir, args.ours)
        prefetch([ref, ours], ALL_CHECKS)
        data = {"stamp": stamp([ref, ours]),
                "facts": {s.label: s._cache for s in (ref, ours)}}
    tmp = args.cache + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(data, f)
    os.replace(tmp, args.cache)
    print("extracted header facts to %s" % args.cache)
    return 0


def print_report(rep, checks):
    summary = ", ".join("%d %s" % (v, k) for k, v in sorted(rep.counts.items()))
    if not summary:
        summary = "the reference declares no such items (extras still fail)"
    print("checked [%s]: %s" % (",".join(checks), summary))
    for e in rep.errors:
        print(e)
    if rep.errors:
        print("FAILED: %d mismatch(es)" % len(rep.errors))
    else:
        print("OK: headers match rdma-core 44 (plus allowlisted extras)")


def cmd_check(args):
    checks = ALL_CHECKS if args.checks == ["all"] else args.checks
    with tempfile.TemporaryDirectory(prefix="abi_check.") as workdir:
        ref, ours = make_sets(args, workdir, args.ours)
        if not load_cache(args.cache, [ref, ours]):
            prefetch([ref, ours], checks)
        rep = run_checks(ref, ours, load_allowlist(args.allowlist), checks,
                         args.cxx)
    print_report(rep, checks)
    return 1 if rep.errors else 0


def cmd_compile(args):
    """Each header first and alone in a TU, strict standard, warnings fatal."""
    lang_cxx = args.std.startswith("c++") or args.std.startswith("gnu++")
    compiler = args.cxx if lang_cxx else args.cc
    failed = 0
    with tempfile.TemporaryDirectory(prefix="abi_compile.") as workdir:
        for h in HEADERS:
            src = os.path.join(workdir, "tu" + (".cc" if lang_cxx else ".c"))
            with open(src, "w") as f:
                # Twice, to exercise the include guard.
                f.write("#include <%s>\n#include <%s>\n" % (h, h))
                f.write("int abi_compile_test_anchor;\n")
            cmd = [compiler, "-std=" + args.std, "-Wall", "-Wextra",
                   "-pedantic", "-Werror", "-O2", "-I",
                   os.path.abspath(args.ours), "-c", "-o",
                   os.path.join(workdir, "tu.o"), src]
            proc = run(cmd, check=False)
            ok = proc.returncode == 0
            print("%s %s -std=%s %s" % ("ok  " if ok else "FAIL",
                                         os.path.basename(compiler), args.std, h))
            if not ok:
                failed += 1
                print("  " + " ".join(cmd))
                print(proc.stdout + proc.stderr)
    return 1 if failed else 0


# Mutations applied to a copy of our headers by `selftest`: each must make the
# named check fail with a message containing the given text.
MUTATIONS = [
    ("field type", "rdma/rdma_cma.h", "layout",
     "\tuint8_t\t\t\tport_num;", "\tuint16_t\t\tport_num;",
     "struct rdma_cm_id.port_num: type is 'uint16_t', rdma-core has 'uint8_t'"),
    ("enum value", "rdma/rdma_cma.h", "enums",
     "RDMA_PS_UDP   = 0x0111,", "RDMA_PS_UDP   = 0x0112,",
     "enumerator RDMA_PS_UDP = 274 in enum rdma_port_space, rdma-core has 273"),
    ("macro value", "rdma/rdma_cma.h", "macros",
     "#define RDMA_UDP_QKEY 0x01234567", "#define RDMA_UDP_QKEY 0x01234568",
     "RDMA_UDP_QKEY (including rdma/rdma_cma.h alone): ours = int 19088744, "
     "rdma-core = int 19088743"),
    ("prototype", "rdma/rsocket.h", "functions",
     "int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen);",
     "int rbind(int socket, struct sockaddr *addr, socklen_t addrlen);",
     "rbind: ours 'extern int rbind(int, struct sockaddr *, socklen_t)', "
     "rdma-core 'extern int rbind(int, const struct sockaddr *, socklen_t)'"),
    ("inline prototype", "rdma/rdma_verbs.h", "functions",
     "rdma_post_send(struct rdma_cm_id *id, void *context, void *addr,\n"
     "\t       size_t length, struct ibv_mr *mr, int flags)",
     "rdma_post_send(struct rdma_cm_id *id, void *context, void *addr,\n"
     "\t       size_t length, struct ibv_mr *mr, unsigned flags)",
     "rdma_post_send: ours 'static int rdma_post_send(struct "
     "rdma_cm_id *, void *, void *, size_t, struct ibv_mr *, unsigned int)'"),
    ("unlisted extra member", "rdma/rdma_cma.h", "layout",
     "\tenum ibv_qp_type\tqp_type;\n};",
     "\tenum ibv_qp_type\tqp_type;\n\tint\t\t\tnew_field;\n};",
     "member struct:rdma_cm_id.new_field is not in rdma-core 44 and not "
     "allowlisted"),
    ("unlisted extra macro", "infiniband/ib.h", "macros",
     "#define sib_raw", "#define SIB_NEW 1\n#define sib_raw",
     "macro SIB_NEW is not in rdma-core 44 and not allowlisted"),
    ("dropped include", "rdma/rsocket.h", "includes",
     "#include <sys/mman.h>\n", "",
     "rdma/rsocket.h does not include <sys/mman.h>"),
]


def cmd_selftest(args):
    """Prove the checker catches breakage: mutate a copy, expect a failure."""
    allow = load_allowlist(args.allowlist)
    with tempfile.TemporaryDirectory(prefix="abi_selftest.") as workdir:
        ref, ours = make_sets(args, workdir, args.ours)
        if not load_cache(args.cache, [ref, ours]):
            prefetch([ref], ALL_CHECKS)

        def one(i):
            what, header, check, old, new, expect = MUTATIONS[i]
            copy = os.path.join(workdir, "mut%d" % i, "include")
            shutil.copytree(args.ours, copy)
            path = os.path.join(copy, header)
            with open(path) as f:
                text = f.read()
            if text.count(old) != 1:
                return False, ("FAIL %s: pattern %r not found exactly once in "
                               "%s (update MUTATIONS)" % (what, old, header))
            with open(path, "w") as f:
                f.write(text.replace(old, new))
            mut = HeaderSet("mut%d" % i, copy, args.cc, workdir, copy)
            mut.label = "ours"
            rep = run_checks(ref, mut, allow, [check], args.cxx)
            hit = [e for e in rep.errors if expect in e]
            return bool(hit), "%s %s (%s): %s" % (
                "ok  " if hit else "FAIL", what, header,
                hit[0] if hit else "expected '%s', got %s" % (expect,
                                                             rep.errors))

        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            results = list(ex.map(one, range(len(MUTATIONS))))
    for _, line in results:
        print(line)
    return 0 if all(ok for ok, _ in results) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ours", required=True, help="our include directory")
    p.add_argument("--cc", default="gcc", help="GNU C compiler (needs -aux-info)")
    p.add_argument("--cxx", default="g++", help="C++ compiler")
    p.add_argument("--allowlist", help="newer-upstream allowlist file")
    p.add_argument("--cache", help="facts file written by `extract` and "
                   "reused by the other commands while the headers match")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("extract")
    c = sub.add_parser("check")
    c.add_argument("checks", nargs="+", choices=ALL_CHECKS + ["all"])
    c = sub.add_parser("compile")
    c.add_argument("--std", required=True)
    sub.add_parser("selftest")
    args = p.parse_args()
    try:
        if ELFFile is None and args.cmd != "compile":
            raise SetupError("python3 module 'elftools' missing: install "
                             "Debian package python3-pyelftools")
        if args.cmd == "check":
            return cmd_check(args)
        if args.cmd == "compile":
            return cmd_compile(args)
        if args.cmd == "extract":
            if not args.cache:
                raise SetupError("extract needs --cache FILE")
            return cmd_extract(args)
        return cmd_selftest(args)
    except SetupError as e:
        print("ABI CHECK SETUP ERROR: %s" % e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
