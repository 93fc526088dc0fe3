#!/usr/bin/env python3
"""The module order, checked on what the compiler made: every symbol an
archive build/lib<module>.a leaves undefined (nm -u) is defined in the same
archive, in the archive of a module below it (the Makefile's MODULES), or in
a system library the binaries link (the Makefile's PKGS through pkg-config,
its LDLIBS' own -l flags, libc and the compiler's runtime, read with nm -D).
layering.py sees #includes only; a call needs no #include of the callee's
header (a declaration in the wrong header, or none), so calls are checked
here: one into a higher archive or into a main file (outside every archive)
makes the lower archive unusable without what sits above it, and only the
link order of today's binaries would hide it.

Prints TAP. Usage: symbols.py [--self-test] [ROOT [BUILD]]; BUILD defaults
to $PC_BUILD or ROOT/build. Fails, rather than passes, when an archive a
module should have is missing (the tree is not built). With --self-test,
runs the check on made-up nm output and on small archives it compiles,
each breaking one rule, and fails unless every one is caught."""
import os
import re
import shlex
import subprocess
import sys
import tempfile

# nm -P types: U undefined; w/v a weak reference, which may stay
# unresolved (the linker makes it 0); these are the global definitions
# (lowercase letters other than i, u are local: they satisfy nothing else).
DEFINED = set('ABCDGRSTVWiu')
WEAK_UNDEFINED = set('wv')
NM_LINE = re.compile(r'^(?P<file>[^\[]*?)(?:\[(?P<member>[^\]]*)\])?: (?P<name>\S+) (?P<type>\S)(?: |$)')
# What the link editor itself defines for an object that asks (gcc's -fPIE
# code names the GOT); it is in no library's symbol table.
LINKER_DEFINED = {'_GLOBAL_OFFSET_TABLE_'}


def nm(args):
    """Defined and undefined symbols per object: {object: (defs, undefs)}.
    Raises RuntimeError when nm fails (fail, not an empty answer)."""
    p = subprocess.run(['nm', '-A', '-P'] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError('nm %s: %s' % (' '.join(args), p.stderr.strip()))
    return parse_nm(p.stdout)


def parse_nm(text):
    objs = {}
    for line in text.splitlines():
        m = NM_LINE.match(line)
        if not m:
            continue
        obj = m.group('member') or os.path.basename(m.group('file'))
        defs, undefs = objs.setdefault(obj, (set(), set()))
        name, t = m.group('name').split('@')[0], m.group('type')
        if t == 'U':
            undefs.add(name)
        elif t in DEFINED:
            defs.add(name)
    return objs


def dynamic_symbols(path):
    """The global definitions of a shared library (nm -D), without versions."""
    p = subprocess.run(['nm', '-D', '-P', '--defined-only', path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError('nm -D %s: %s' % (path, p.stderr.strip()))
    out = set()
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1] in DEFINED:
            out.add(f[0].split('@')[0])
    return out


def makefile_var(root, var):
    with open(os.path.join(root, 'Makefile')) as f:
        text = f.read()
    return [m.group(1) for m in re.finditer(r'^%s\s*[:+]?=\s*(.*)$' % var, text, re.M)]


def search_dirs(cc):
    """Where the link editor looks for -lNAME: the compiler's own library
    path first (cc -print-search-dirs), then ld's SEARCH_DIRs."""
    dirs = []
    p = subprocess.run([cc, '-print-search-dirs'], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True)
    for line in p.stdout.splitlines():
        if line.startswith('libraries:'):
            dirs += [os.path.normpath(d) for d in line.split('=', 1)[-1].split(':') if d]
    p = subprocess.run(['ld', '--verbose'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       universal_newlines=True)
    dirs += [d.lstrip('=') for d in re.findall(r'SEARCH_DIR\("([^"]+)"\)', p.stdout)]
    return [d for i, d in enumerate(dirs) if d not in dirs[:i]]


def find_lib(name, dirs):
    """-lNAME as ld finds it: libNAME.so, else libNAME.a, in dirs' order."""
    for d in dirs:
        for ext in ('.so', '.a'):
            p = os.path.join(d, 'lib' + name + ext)
            if os.path.isfile(p):
                return p
    return None


def library_symbols(path, dirs, seen):
    """Global definitions of a library file: a shared object (nm -D), an
    archive (nm), or a GNU ld script (libc.so, libncurses.so) whose GROUP /
    INPUT entries are followed."""
    if path in seen:
        return set()
    seen.add(path)
    with open(path, 'rb') as f:
        head = f.read(4)
    if head == b'\x7fELF':
        return dynamic_symbols(path)
    if head == b'!<ar':
        out = set()
        for defs, _ in nm([path]).values():
            out |= defs
        return out
    with open(path, errors='replace') as f:
        script = re.sub(r'/\*.*?\*/', ' ', f.read(), flags=re.S)
    out = set()
    for m in re.finditer(r'\b(?:GROUP|INPUT)\s*\(', script):
        depth, end = 1, m.end()
        while depth and end < len(script):
            depth += {'(': 1, ')': -1}.get(script[end], 0)
            end += 1
        body = re.sub(r'\bAS_NEEDED\b|[(),]', ' ', script[m.end():end - 1])
        for tok in body.split():
            if tok.startswith('-l'):
                p = find_lib(tok[2:], dirs)
            elif os.path.isabs(tok):
                p = tok
            else:
                p = os.path.join(os.path.dirname(path), tok)
                p = p if os.path.isfile(p) else find_lib(re.sub(r'^lib|\.so.*$|\.a$', '', tok), dirs)
            if not p or not os.path.isfile(p):
                raise RuntimeError('%s names %s, which is not there' % (path, tok))
            out |= library_symbols(p, dirs, seen)
    if not out:
        raise RuntimeError('%s: neither a library nor a linker script naming one' % path)
    return out


def system_libraries(root, cc):
    """The -l flags the binaries link with (pkg-config --libs of the
    Makefile's PKGS, LDLIBS' own -l flags, libc) and the compiler's runtime:
    {flag or path: resolved path}. Raises RuntimeError on one not found."""
    pkgs = ' '.join(makefile_var(root, 'PKGS')).split()
    p = subprocess.run(['pkg-config', '--libs'] + pkgs, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0 or not pkgs:
        raise RuntimeError('pkg-config --libs %s: %s' % (' '.join(pkgs), p.stderr.strip()))
    flags = shlex.split(p.stdout)
    for v in makefile_var(root, 'LDLIBS'):
        flags += re.findall(r'(?<!\S)(-l[\w.+-]+)', v)
    flags.append('-lc')
    ldirs = [f[2:] for f in flags if f.startswith('-L')]
    dirs = ldirs + search_dirs(cc)
    libs = {}
    for f in flags:
        if f.startswith('-l') and f not in libs:
            path = find_lib(f[2:], dirs)
            if not path:
                raise RuntimeError('%s: no lib%s.so or lib%s.a in %s' % (f, f[2:], f[2:], ' '.join(dirs)))
            libs[f] = path
    p = subprocess.run([cc, '-print-libgcc-file-name'], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True)
    if p.returncode == 0 and os.path.isfile(p.stdout.strip()):
        libs['(compiler runtime)'] = p.stdout.strip()
    return libs, dirs


def check(order, archives, mains, system):
    """The core, on data only. order: the modules, lowest first; archives:
    {module: {object: (defs, undefs)}}; mains: {main file: defs}; system:
    the symbols the system libraries define. Returns {module: [problem]}."""
    rank = {m: i for i, m in enumerate(order)}
    where = {}  # symbol -> [(module, object)]
    for mod, objs in archives.items():
        for obj, (defs, _) in objs.items():
            for s in defs:
                where.setdefault(s, []).append((mod, obj))
    problems = {}
    for mod, objs in archives.items():
        bad = problems.setdefault(mod, [])
        for obj, (_, undefs) in sorted(objs.items()):
            for s in sorted(undefs):
                homes = where.get(s, [])
                if any(rank[m] <= rank[mod] for m, _ in homes) or s in system or s in LINKER_DEFINED:
                    continue
                if homes:
                    m, o = min(homes, key=lambda h: rank[h[0]])
                    bad.append('lib%s.a(%s) uses %s, defined in lib%s.a(%s): %s is above %s '
                               'in the module order' % (mod, obj, s, m, o, m, mod))
                    continue
                in_main = sorted(f for f, defs in mains.items() if s in defs)
                if in_main:
                    bad.append('lib%s.a(%s) uses %s, defined only in %s, outside every archive'
                               % (mod, obj, s, ' and '.join(in_main)))
                else:
                    bad.append('lib%s.a(%s) uses %s, defined in no archive below it and in no '
                               'system library the binaries link' % (mod, obj, s))
    return problems


def module_sources(root, mod):
    """The Makefile's rule: every .c of the module but main.c goes into the
    archive; main.c is the binary's own."""
    d = os.path.join(root, mod)
    names = sorted(n for n in os.listdir(d) if n.endswith('.c')) if os.path.isdir(d) else []
    return ([n for n in names if n != 'main.c'], [n for n in names if n == 'main.c'])


def run(root, build, cc, out, system=None):
    n = 0
    failed = 0

    def report(ok, desc, detail=()):
        nonlocal n, failed
        n += 1
        out.write('%s %d - %s\n' % ('ok' if ok else 'not ok', n, desc))
        for d in list(detail)[:40]:
            out.write('#   %s\n' % d)
        failed += 0 if ok else 1

    order = (makefile_var(root, 'MODULES') or [''])[0].split()
    report(bool(order), 'the Makefile states the module order (MODULES)')
    archives, mains, missing = {}, {}, []
    for mod in order:
        srcs, main_srcs = module_sources(root, mod)
        if srcs:
            a = os.path.join(build, 'lib%s.a' % mod)
            if not os.path.isfile(a):
                missing.append('%s (module %s/ has %d source files): build it first (make all)'
                               % (a, mod, len(srcs)))
                continue
            try:
                archives[mod] = nm([a])
            except RuntimeError as e:
                missing.append(str(e))
        for f in main_srcs:
            o = os.path.join(build, mod, f[:-2] + '.o')
            if os.path.isfile(o):
                mains['%s/%s' % (mod, f)] = set().union(*[d for d, _ in nm([o]).values()])
    report(bool(archives) and not missing, 'every module with sources has its archive in %s/' % build,
           missing if missing or archives else ['no archive at all in %s/: build it first (make all)'
                                                % build])
    if system is None:
        try:
            libs, dirs = system_libraries(root, cc)
            system, seen = set(), set()
            for path in libs.values():
                system |= library_symbols(path, dirs, seen)
            report(bool(system), 'the system libraries the binaries link are found (%s)'
                   % ' '.join(libs))
        except (RuntimeError, OSError) as e:
            report(False, 'the system libraries the binaries link are found', [str(e)])
            system = set()
    problems = check(order, archives, mains, system)
    for mod in order:
        if mod in archives:
            report(not problems[mod], 'lib%s.a uses only itself, the archives below it and the '
                   'system libraries' % mod, problems[mod])
    return n, failed


# ---- self-test ---------------------------------------------------------

def self_test_data():
    """The core on made-up nm output: each broken case must be caught."""
    order = ['lo', 'mid', 'hi']
    base = {'lo': {'a.o': ({'lo_f'}, {'malloc'})},
            'mid': {'b.o': ({'mid_f'}, {'lo_f', 'mid_g'}), 'c.o': ({'mid_g'}, set())},
            'hi': {'d.o': ({'hi_f'}, {'mid_f', 'lo_f', 'printf'})}}
    mains = {'hi/main.c': {'main', 'hi_daemon_reload'}}
    system = {'malloc', 'printf'}

    def with_undef(mod, obj, sym):
        a = {m: {o: (set(d), set(u)) for o, (d, u) in objs.items()} for m, objs in base.items()}
        a[mod][obj][1].add(sym)
        return a
    cases = [
        ('sound (own, lower and system symbols)', base, True, None),
        ('a call upwards (lo uses mid)', with_undef('lo', 'a.o', 'mid_f'), False, 'mid_f'),
        ('a call two modules up (lo uses hi)', with_undef('lo', 'a.o', 'hi_f'), False, 'hi_f'),
        ('a call into a main file', with_undef('hi', 'd.o', 'hi_daemon_reload'), False,
         'defined only in hi/main.c'),
        ('a symbol defined nowhere', with_undef('mid', 'b.o', 'nowhere'), False, 'nowhere'),
        ('a local symbol of another object', with_undef('lo', 'a.o', 'static_of_mid'), False,
         'static_of_mid'),
    ]
    results = []
    for name, archives, sound, must_name in cases:
        problems = [p for ps in check(order, archives, mains, system).values() for p in ps]
        ok = (not problems) == sound and (sound or any(must_name in p for p in problems))
        results.append((ok, 'self-test: a set of archives with %s is %s' %
                        (name, 'passed' if sound else 'refused, naming the symbol')))
    # the parser: an archive member, a versioned name, a weak reference
    objs = parse_nm('build/liblo.a[a.o]: lo_f T 0 10\nbuild/liblo.a[a.o]: malloc U\n'
                    'build/liblo.a[a.o]: __gmon_start__ w\nbuild/liblo.a[a.o]: st t 10 4\n'
                    'x.so: memcpy@@GLIBC_2.14 i 9be70 109\n')
    ok = objs == {'a.o': ({'lo_f'}, {'malloc'}), 'x.so': ({'memcpy'}, set())}
    results.append((ok, 'self-test: nm -P output is read as definitions and references'))
    return results


def self_test_real(cc):
    """The whole check on archives compiled here: lo's object calls into
    hi's archive (refused), then the same tree without that call (passed),
    then without an archive (refused: the tree is not built)."""
    results = []
    with tempfile.TemporaryDirectory() as root:
        build = os.path.join(root, 'build')
        files = {'lo/a.c': 'int lo_f(void);\nint lo_f(void) { return 1; }\n',
                 'hi/b.c': 'int lo_f(void);\nint hi_f(void);\n'
                           'int puts(const char *);\n'
                           'int hi_f(void) { return lo_f() + puts("x"); }\n',
                 'hi/main.c': 'int hi_f(void);\nint hi_reload(void);\n'
                              'int hi_reload(void) { return 0; }\n'
                              'int main(void) { return hi_f(); }\n'}
        upward = 'int hi_f(void);\nint lo_f(void);\nint lo_f(void) { return hi_f(); }\n'
        into_main = 'int hi_reload(void);\nint lo_f(void);\nint lo_f(void) { return hi_reload(); }\n'
        with open(os.path.join(root, 'Makefile'), 'w') as f:
            f.write('MODULES := lo hi\nPKGS := \nLDLIBS += -lpthread\n')

        def build_tree(lo_src):
            for p, body in dict(files, **{'lo/a.c': lo_src}).items():
                os.makedirs(os.path.join(root, os.path.dirname(p)), exist_ok=True)
                os.makedirs(os.path.join(build, os.path.dirname(p)), exist_ok=True)
                with open(os.path.join(root, p), 'w') as f:
                    f.write(body)
                subprocess.run([cc, '-c', '-O2', '-o', os.path.join(build, p[:-2] + '.o'),
                                os.path.join(root, p)], check=True)
            for m, o in (('lo', 'lo/a.o'), ('hi', 'hi/b.o')):
                a = os.path.join(build, 'lib%s.a' % m)
                if os.path.exists(a):
                    os.remove(a)
                subprocess.run(['ar', 'rcs', a, os.path.join(build, o)], check=True)

        devnull = open(os.devnull, 'w')
        for name, src, sound in (('a call upwards', upward, False),
                                 ('a call into a main file', into_main, False),
                                 ('calls only downwards', files['lo/a.c'], True)):
            build_tree(src)
            _, bad = run(root, build, cc, devnull, system={'puts'})
            results.append(((bad == 0) == sound, 'self-test: compiled archives with %s are %s'
                            % (name, 'passed' if sound else 'refused')))
        os.remove(os.path.join(build, 'liblo.a'))
        _, bad = run(root, build, cc, devnull, system={'puts'})
        results.append((bad > 0, 'self-test: a tree whose archive is missing is refused'))
        os.remove(os.path.join(build, 'libhi.a'))
        _, bad = run(root, build, cc, devnull, system={'puts'})
        results.append((bad > 0, 'self-test: a tree without any archive is refused'))
    return results


def main():
    args = [a for a in sys.argv[1:] if a != '--self-test']
    cc = os.environ.get('CC') or 'cc'
    if '--self-test' in sys.argv:
        results = self_test_data() + self_test_real(cc)
        for i, (ok, desc) in enumerate(results, 1):
            print('%s %d - %s' % ('ok' if ok else 'not ok', i, desc))
        print('1..%d' % len(results))
        return 0 if all(ok for ok, _ in results) else 1
    root = args[0] if args else '.'
    build = args[1] if len(args) > 1 else os.path.join(root, os.environ.get('PC_BUILD') or 'build')
    n, failed = run(root, build, cc, sys.stdout)
    print('1..%d' % n)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
