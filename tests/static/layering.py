#!/usr/bin/env python3
"""The module order, checked: every #include "dir/file.h" in a module goes
to the module itself or to the public header of a module below it
(docs/layout.md). The order is read from the Makefile's MODULES; docs/layout.md
must state the same one. Prints TAP. With --self-test, runs the check on
made-up trees that break each rule and fails unless every one is caught."""
import os
import re
import sys
import tempfile

INC = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_]+\.h)"', re.M)
# A declaration or definition of a pc_ name: a function at the start of a
# line (after its return type) or a struct/enum with a body.
PC_NAME = re.compile(r'^(?:[A-Za-z_][\w \t*]*?[\s*])?(pc_\w+)\s*\(|^\s*(?:struct|enum)\s+(pc_\w+)\s*\{',
                     re.M)
# Not modules: they may include any module's headers (internal ones too),
# and no module may include them.
OUTSIDE = ('tests', 'bench')


def public_header(mod):
    return 'pc.h' if mod == 'common' else mod + '.h'


def read_order(root):
    with open(os.path.join(root, 'Makefile')) as f:
        m = re.search(r'^MODULES\s*:=\s*(.+)$', f.read(), re.M)
    return m.group(1).split() if m else []


def doc_order(root):
    """The line of docs/layout.md that states the order: `a` · `b` · ..."""
    try:
        with open(os.path.join(root, 'docs', 'layout.md')) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r'^Module order, lowest first: (.+)$', text, re.M)
    return re.findall(r'`([a-z_]+)/`', m.group(1)) if m else None


def check_module(root, mod, order):
    """Problems of one module: a list of 'file:line: why'."""
    bad = []
    rank = {m: i for i, m in enumerate(order)}
    d = os.path.join(root, mod)
    allowed_h = {public_header(mod), mod + '_int.h'}
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if name.endswith('.h') and name not in allowed_h:
            bad.append('%s/%s: a module has one public header (%s) and one internal '
                       'one (%s_int.h)' % (mod, name, public_header(mod), mod))
        if not name.endswith(('.c', '.h')):
            continue
        with open(path, errors='replace') as f:
            text = f.read()
        if mod != 'common':
            for m in PC_NAME.finditer(text):
                if m.group(0).lstrip().startswith(('return', 'if', 'while')):
                    continue
                line = text.count('\n', 0, m.start()) + 1
                bad.append('%s/%s:%d: %s: the pc_ prefix belongs to common/' %
                           (mod, name, line, m.group(1) or m.group(2)))
        for m in INC.finditer(text):
            line = text.count('\n', 0, m.start()) + 1
            where = '%s/%s:%d: #include "%s/%s"' % (mod, name, line, m.group(1), m.group(2))
            other, hdr = m.group(1), m.group(2)
            if other == mod:
                if hdr not in allowed_h:
                    bad.append(where + ': no such header of the module')
            elif other in OUTSIDE:
                bad.append(where + ': %s/ is not a module; no module uses it' % other)
            elif other not in rank:
                bad.append(where + ': %s/ is not in the module order' % other)
            elif rank[other] > rank[mod]:
                bad.append(where + ': %s is above %s in the module order' % (other, mod))
            elif hdr != public_header(other):
                bad.append(where + ': only %s/%s is the interface of %s' %
                           (other, public_header(other), other))
    return bad


def run(root, out):
    n = 0
    failed = 0

    def report(ok, desc, detail=()):
        nonlocal n, failed
        n += 1
        out.write('%s %d - %s\n' % ('ok' if ok else 'not ok', n, desc))
        for d in list(detail)[:40]:
            out.write('#   %s\n' % d)
        failed += 0 if ok else 1

    order = read_order(root)
    report(bool(order), 'the Makefile states the module order (MODULES)')
    doc = doc_order(root)
    report(doc == order, 'docs/layout.md states the same order as the Makefile',
           ['Makefile:       %s' % ' '.join(order), 'docs/layout.md: %s' % ' '.join(doc or [])])
    for mod in order:
        if not os.path.isdir(os.path.join(root, mod)):
            report(False, '%s/ exists' % mod)
            continue
        bad = check_module(root, mod, order)
        report(not bad, '%s/ includes only itself and public headers below it' % mod, bad)
    # a directory of C code that is neither a module nor outside the order
    stray = [e for e in sorted(os.listdir(root))
             if os.path.isdir(os.path.join(root, e)) and e not in order and e not in OUTSIDE
             and not e.startswith('.') and e != 'build'
             and any(f.endswith(('.c', '.h')) for f in os.listdir(os.path.join(root, e)))]
    report(not stray, 'every directory of C code is a module of the order (or tests/, bench/)',
           stray)
    return n, failed


def self_test(out):
    """Each broken tree must be caught; the sound one must pass."""
    cases = {
        'sound': ({'lo/lo.h': '', 'lo/a.c': '#include "lo/lo.h"\n',
                   'hi/hi.h': '#include "lo/lo.h"\n', 'hi/hi_int.h': '',
                   'hi/b.c': '#include "hi/hi_int.h"\n#include "lo/lo.h"\n'}, True),
        'upwards': ({'lo/lo.h': '', 'lo/a.c': '#include "hi/hi.h"\n', 'hi/hi.h': ''}, False),
        'internal of another': ({'lo/lo.h': '', 'lo/lo_int.h': '', 'hi/hi.h': '',
                                 'hi/b.c': '#include "lo/lo_int.h"\n'}, False),
        'a third header': ({'lo/lo.h': '', 'lo/extra.h': '', 'hi/hi.h': ''}, False),
        'bench from a module': ({'lo/lo.h': '', 'lo/a.c': '#include "bench/lib.h"\n',
                                'hi/hi.h': ''}, False),
        'stray directory': ({'lo/lo.h': '', 'hi/hi.h': '', 'odd/x.c': ''}, False),
        'a pc_ name outside common': ({'lo/lo.h': '', 'hi/hi.h': 'int pc_thing(void);\n'}, False),
        'a pc_ struct outside common': ({'lo/lo.h': 'struct pc_x {\n\tint a;\n};\n', 'hi/hi.h': ''}, False),
        'a call of a pc_ function': ({'lo/lo.h': '', 'hi/hi.h': '',
                                      'hi/a.c': 'static int f(void)\n{\n\treturn pc_err_set(0);\n}\n'}, True),
    }
    n = 0
    failed = 0
    for name, (files, sound) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for p, body in files.items():
                os.makedirs(os.path.join(root, os.path.dirname(p)), exist_ok=True)
                with open(os.path.join(root, p), 'w') as f:
                    f.write(body)
            with open(os.path.join(root, 'Makefile'), 'w') as f:
                f.write('MODULES := lo hi\n')
            os.makedirs(os.path.join(root, 'docs'))
            with open(os.path.join(root, 'docs', 'layout.md'), 'w') as f:
                f.write('Module order, lowest first: `lo/` · `hi/`\n')
            devnull = open(os.devnull, 'w')
            _, bad = run(root, devnull)
        n += 1
        ok = (bad == 0) == sound
        failed += 0 if ok else 1
        out.write('%s %d - self-test: a tree that is %s is %s\n' %
                  ('ok' if ok else 'not ok', n, name, 'passed' if sound else 'refused'))
    return n, failed


def main():
    root = sys.argv[-1] if len(sys.argv) > 1 and sys.argv[-1] != '--self-test' else '.'
    if '--self-test' in sys.argv:
        n, failed = self_test(sys.stdout)
    else:
        n, failed = run(root, sys.stdout)
    print('1..%d' % n)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
